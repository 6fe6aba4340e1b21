export const RUN_STATUSES = [
  'queued',
  'running',
  'success',
  'failed',
  'partialSuccess',
  'stopped',
  'cancelled',
] as const;

export type RunStatus = (typeof RUN_STATUSES)[number];

const TERMINAL: ReadonlySet<RunStatus> = new Set([
  'success',
  'failed',
  'partialSuccess',
  'stopped',
  'cancelled',
]);

export function isTerminal(status: RunStatus): boolean {
  return TERMINAL.has(status);
}

export function isRunStatus(value: unknown): value is RunStatus {
  return typeof value === 'string' && (RUN_STATUSES as readonly string[]).includes(value);
}

/** A run as the API shows it. Times are ISO-8601 strings; absent times are null. */
export interface Run {
  /** A UUID the server gave the run, unique across pipelines (ZenML and Freight name runs so). */
  id: string;
  pipeline: string;
  runId: string;
  status: RunStatus;
  cancelRequested: boolean;
  createdAt: string;
  startedAt: string | null;
  endedAt: string | null;
  /** The seq of the run stream's newest entry (0 when empty). */
  lastSeq: number;
  /** Bytes of log text written so far. */
  logBytes: number;
  meta: Record<string, unknown>;
}

/** A run as the runs feed carries it: without its `meta`, which can be large. */
export type RunSummary = Omit<Run, 'meta'>;

export interface PipelineSummary {
  fqn: string;
  /** A UUID derived from the FQN, stable for ever (OpenMetadata's clients name pipelines so). */
  id: string;
  runs: number;
  lastRun: Run | null;
}
