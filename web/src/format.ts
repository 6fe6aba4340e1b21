export { formatBytes } from '../../src/client/index.js';

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  const seconds = Math.floor(ms / 1000);
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m ${seconds % 60}s`;
  return `${Math.floor(minutes / 60)}h ${minutes % 60}m`;
}

/** Where the dashboard shows a run. */
export function runHref(pipeline: string, runId: string): string {
  return `/ui/pipelines/${encodeURIComponent(pipeline)}/runs/${encodeURIComponent(runId)}`;
}

/** Where the dashboard shows a pipeline and its runs. */
export function pipelineHref(pipeline: string): string {
  return `/ui/pipelines/${encodeURIComponent(pipeline)}`;
}

/** How long ago a time was, as a person says it: "just now", "3 min ago", "2 h ago", "5 d ago". */
export function formatRelative(at: number, now: number): string {
  const seconds = Math.floor((now - at) / 1000);
  // A time a little ahead of this clock (another machine's) is "just now", not "in 2 s".
  if (!Number.isFinite(seconds) || seconds < 10) return 'just now';
  if (seconds < 60) return `${seconds} s ago`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ago`;
  return `${Math.floor(hours / 24)} d ago`;
}

/** A run's duration: start to end, or to now while it runs; "—" before it started. */
export function runDurationMs(
  run: { startedAt: string | null; endedAt: string | null },
  now: number,
): number | null {
  if (!run.startedAt) return null;
  const end = run.endedAt ? Date.parse(run.endedAt) : now;
  return Math.max(0, end - Date.parse(run.startedAt));
}
