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
