import type { Run } from '../model/run.js';
import { isTerminal } from '../model/run.js';
import { globMatches } from '../model/scopes.js';
import type { Settings } from '../model/settings.js';
import type { Store, TrimPolicy } from './store.js';

export type RetentionSettings = Pick<
  Settings,
  | 'topicMaxEntries'
  | 'topicMaxAgeSeconds'
  | 'retentionIntervalSeconds'
  | 'retention'
  | 'runRetention'
>;

/** How a run is deleted: through the engine, so its viewers hear of it at once. */
export type DeleteRun = (pipeline: string, runId: string) => Promise<unknown>;

type RunRule = Settings['runRetention'][number];

/** The first rule of `runRetention` whose glob matches the pipeline, if any. */
export function runRule(pipeline: string, settings: RetentionSettings): RunRule | undefined {
  return settings.runRetention.find((rule) => globMatches(rule.pipeline, pipeline));
}

/**
 * The runs of one pipeline (newest first) that its rule removes: past the newest `maxRuns`, or
 * ended before `maxAgeDays` ago; never a run still going.
 */
export function runsToRemove(runs: readonly Run[], rule: RunRule, now: number): Run[] {
  const cutoff = rule.maxAgeDays === undefined ? undefined : now - rule.maxAgeDays * 86_400_000;
  return runs.filter((run, newer) => {
    if (!isTerminal(run.status)) return false;
    if (rule.maxRuns !== undefined && newer >= rule.maxRuns) return true;
    const ended = Date.parse(run.endedAt ?? run.createdAt);
    return cutoff !== undefined && ended < cutoff;
  });
}

/** A topic's policy: its own override where the config file gives one, else the defaults. */
export function retentionPolicy(
  topic: string,
  settings: RetentionSettings,
  now: number,
): TrimPolicy {
  const own = settings.retention[topic] ?? {};
  const maxEntries = own.maxEntries ?? settings.topicMaxEntries;
  const maxAgeSeconds = own.maxAgeSeconds ?? settings.topicMaxAgeSeconds;
  return {
    maxEntries,
    olderThanMs: maxAgeSeconds > 0 ? now - maxAgeSeconds * 1000 : undefined,
  };
}

/**
 * Every retentionIntervalSeconds: trims every topic by its policy, and removes the runs that
 * `runRetention` does not keep. Retention and an admin's DELETE are the only things that delete
 * data, and viewers are told of what was deleted with a `gap` frame.
 */
export class RetentionLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(
    private readonly store: Store,
    private readonly settings: RetentionSettings,
    private readonly onError: (error: unknown) => void = () => {},
    private readonly now: () => number = Date.now,
    private readonly deleteRun: DeleteRun = (pipeline, runId) => store.deleteRun(pipeline, runId),
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.runOnce().catch(this.onError);
    }, this.settings.retentionIntervalSeconds * 1000);
    this.timer.unref();
  }

  /** One pass over every topic; resolves with the number of entries removed. */
  runOnce(): Promise<number> {
    this.running ??= this.pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async pass(): Promise<number> {
    return (await this.trimTopics()) + (await this.removeRuns());
  }

  /** Runs removed by `runRetention`, a pipeline at a time; each counts as one. */
  private async removeRuns(): Promise<number> {
    if (this.settings.runRetention.length === 0) return 0;
    let removed = 0;
    let after: string | undefined;
    do {
      const page = await this.store.listPipelines({ after, limit: 1000 });
      for (const pipeline of page.items) {
        const rule = runRule(pipeline.fqn, this.settings);
        if (rule) removed += await this.removeRunsOf(pipeline.fqn, rule);
      }
      after = page.next;
    } while (after !== undefined);
    return removed;
  }

  private async removeRunsOf(pipeline: string, rule: RunRule): Promise<number> {
    // Every run, newest first, so `maxRuns` counts from the newest; a page at a time.
    const runs: Run[] = [];
    let after: string | undefined;
    do {
      const page = await this.store.listRuns(pipeline, { after, limit: 1000 });
      runs.push(...page.items);
      after = page.next;
    } while (after !== undefined);
    const doomed = runsToRemove(runs, rule, this.now());
    for (const run of doomed) await this.deleteRun(pipeline, run.runId);
    return doomed.length;
  }

  private async trimTopics(): Promise<number> {
    let removed = 0;
    let after: string | undefined;
    do {
      const page = await this.store.listTopics({ after, limit: 1000 });
      for (const topic of page.items) {
        const policy = retentionPolicy(topic, this.settings, this.now());
        if (policy.maxEntries === 0 && policy.olderThanMs === undefined) continue;
        removed += (await this.store.trimTopic(topic, policy)).removed;
      }
      after = page.next;
    } while (after !== undefined);
    return removed;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }
}
