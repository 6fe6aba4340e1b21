const pad = (value: number, width = 2) => String(value).padStart(width, '0');

/** A line's time of day, in the browser's time zone, to the millisecond. */
export function formatClock(ms: number): string {
  if (!Number.isFinite(ms)) return '';
  const date = new Date(ms);
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

/** Time since the run began, `+M:SS.mmm` (or `+H:MM:SS.mmm` past an hour). */
export function formatElapsed(ms: number, since: number): string {
  if (!Number.isFinite(ms) || !Number.isFinite(since)) return '';
  const total = Math.max(0, Math.round(ms - since));
  const millis = total % 1000;
  const seconds = Math.floor(total / 1000) % 60;
  const minutes = Math.floor(total / 60_000) % 60;
  const hours = Math.floor(total / 3_600_000);
  const clock = hours > 0 ? `${hours}:${pad(minutes)}` : `${minutes}`;
  return `+${clock}:${pad(seconds)}.${pad(millis, 3)}`;
}

/** A section's duration: `850 ms`, `12.3 s`, `4m 05s`. */
export function formatSpan(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.floor(ms / 1000) % 60;
  return minutes < 60
    ? `${minutes}m ${pad(seconds)}s`
    : `${Math.floor(minutes / 60)}h ${pad(minutes % 60)}m`;
}
