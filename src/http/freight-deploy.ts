import type { Run, RunStatus } from '../model/run.js';

/**
 * A Tailwater run as Freight's deploy (docs/API.md, "Freight"): the deploy `{app}/{env}#{number}`
 * is the run `{number}` of the pipeline `{app}.{env}`, so `tailwater run --pipeline app.env
 * --run-id 7 -- ./deploy.sh` is the deploy app/env#7 in Freight's UI.
 */
export type FreightStatus = 'pending' | 'in_progress' | 'finished' | 'failed' | 'cancelled';

/**
 * Freight's UI polls while a deploy is `pending` or `in_progress` and renders each of the other
 * three as an outcome. A partial success did not deploy everything it was asked to, so it is
 * not `finished`; a run stopped from outside is what Freight calls cancelled.
 */
const STATUS: Record<RunStatus, FreightStatus> = {
  queued: 'pending',
  running: 'in_progress',
  success: 'finished',
  failed: 'failed',
  partialSuccess: 'failed',
  stopped: 'cancelled',
  cancelled: 'cancelled',
};

export function freightStatus(status: RunStatus): FreightStatus {
  return STATUS[status];
}

/** The pipeline and run a deploy `{app}/{env}/{number}` names. */
export function deployRun(app: string, env: string, number: string) {
  return { pipeline: `${app}.${env}`, runId: number };
}

/** The app and environment a pipeline `{app}.{env}` stands for (the last dot splits them). */
export function appOf(pipeline: string): { app: string; environment: string } | undefined {
  const dot = pipeline.lastIndexOf('.');
  if (dot <= 0 || dot === pipeline.length - 1) return undefined;
  return { app: pipeline.slice(0, dot), environment: pipeline.slice(dot + 1) };
}

/**
 * Freight's app list entry, which its UI needs before it shows any deploy page: its
 * environments are those of the pipelines `{app}.{env}`. Tailwater deploys nothing itself, so
 * there is no repository, and no app is locked.
 */
export function serializeApp(app: string, environments: readonly string[]) {
  return {
    id: app,
    name: app,
    environments: Object.fromEntries(environments.map((env) => [env, { defaultRef: 'master' }])),
    repository: null,
    changeLabels: [],
    lockedReason: null,
  };
}

/**
 * Freight writes times as naive UTC with six decimals and a literal Z
 * (`2026-12-01T22:22:02.123000Z`); its UI parses them as such.
 */
export function freightDate(iso: string): string;
export function freightDate(iso: string | null): string | null;
export function freightDate(iso: string | null): string | null {
  if (iso === null) return null;
  return new Date(iso).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

function seconds(from: string, to: string): number {
  return Math.round((Date.parse(to) - Date.parse(from)) / 10) / 100;
}

/** A string field of the run's meta, if the producer set one (`sha`, `ref`, `user`…). */
function metaString(run: Run, name: string): string | undefined {
  const value = run.meta[name];
  if (typeof value === 'string') return value;
  if (
    value &&
    typeof value === 'object' &&
    typeof (value as { name?: unknown }).name === 'string'
  ) {
    return (value as { name: string }).name;
  }
  return undefined;
}

/**
 * The deploy JSON Freight's UI reads. What Tailwater does not know of a deploy (its commit,
 * who started it) comes from the run's `meta` when the producer put it there; the UI shows
 * `user.name` unconditionally, so there is always a user. `estimatedDuration` is the mean
 * duration of `recent` (the pipeline's recent successful runs), as Freight estimates it.
 */
export function serializeDeploy(run: Run, recent: readonly Run[]) {
  const { app, environment } = appOf(run.pipeline) ?? { app: run.pipeline, environment: '' };
  const number = /^\d{1,15}$/.test(run.runId) ? Number(run.runId) : run.runId;
  const duration =
    run.startedAt && run.endedAt && run.endedAt >= run.startedAt
      ? seconds(run.startedAt, run.endedAt)
      : null;
  const durations = recent.flatMap((r) =>
    r.startedAt && r.endedAt ? [seconds(r.startedAt, r.endedAt)] : [],
  );
  const estimatedDuration =
    duration ??
    (durations.length > 0
      ? Math.round((durations.reduce((a, b) => a + b, 0) / durations.length) * 100) / 100
      : null);
  return {
    id: run.id,
    name: `${app}/${environment}#${run.runId}`,
    app: { id: app, name: app },
    environment,
    number,
    status: freightStatus(run.status),
    sha: metaString(run, 'sha') ?? null,
    sha_url: metaString(run, 'sha_url') ?? '',
    ref: metaString(run, 'ref') ?? '',
    remote: { name: metaString(run, 'remote') ?? '', url: metaString(run, 'remote_url') ?? '' },
    user: {
      id: metaString(run, 'user') ?? 'tailwater',
      name: metaString(run, 'user') ?? 'tailwater',
      dateCreated: freightDate(run.createdAt),
    },
    duration,
    estimatedDuration,
    dateCreated: freightDate(run.createdAt),
    dateStarted: freightDate(run.startedAt),
    dateFinished: freightDate(run.endedAt),
  };
}
