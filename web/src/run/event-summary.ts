import type { Entry } from '../../../src/model/entry.js';

const MAX_CHARS = 200;

/** A scalar as an event's summary shows it: strings bare, the rest as JSON says them. */
function scalar(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) {
    return String(value);
  }
  return null;
}

function clip(text: string): string {
  return text.length > MAX_CHARS ? `${text.slice(0, MAX_CHARS - 1)}…` : text;
}

/**
 * An event's data in words, as the events panel shows it: a status or step change as its new
 * state (with its message, if any), a progress event as a percentage, a flat object as
 * `key: value` pairs, anything else as JSON. Whatever it says, the whole JSON is the title.
 */
export function summarizeEvent(entry: Entry): string {
  const data = entry.data;
  if (data === undefined) return '';
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return clip(JSON.stringify(data));
  }
  const fields = data as Record<string, unknown>;
  const state = scalar(fields['status']) ?? scalar(fields['state']);
  const message = scalar(fields['message']);
  if ((entry.kind === 'status' || entry.kind === 'step') && state !== null) {
    return clip(message ? `${state}: ${message}` : state);
  }
  const pct = fields['pct'];
  if (entry.kind === 'progress' && typeof pct === 'number' && Number.isFinite(pct)) {
    return `${Math.round(pct)} %`;
  }
  const pairs = Object.entries(fields).map(([key, value]) => {
    const said = scalar(value);
    return said === null ? null : `${key}: ${said}`;
  });
  if (pairs.length > 0 && pairs.every((pair) => pair !== null)) return clip(pairs.join(' · '));
  return clip(JSON.stringify(data));
}
