import type { RunStatus } from '../../../src/model/run.js';

/** The theme's custom property (theme.css) each status is drawn in. */
const STATUS_PROPERTY: Record<RunStatus, string> = {
  success: '--ok',
  failed: '--bad',
  running: '--accent',
  partialSuccess: '--warn',
  cancelled: '--fg-muted',
  stopped: '--fg-muted',
  queued: '--fg-muted',
};

/** A canvas cannot read var(--…): the property's value now, or `fallback` without a stylesheet. */
export function themeColor(property: string, fallback = '#888'): string {
  const value = getComputedStyle(document.documentElement).getPropertyValue(property).trim();
  return value === '' ? fallback : value;
}

export function statusColor(status: RunStatus): string {
  return themeColor(STATUS_PROPERTY[status]);
}
