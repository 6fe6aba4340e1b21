/**
 * A point in time as a user writes one in a search (docs/SEARCH.md): an ISO-8601 date or time
 * (`2026-11-30`, `2026-11-30T08:00:00Z`), or a span back from now (`90s`, `30m`, `24h`, `7d`,
 * `2w`). Undefined when it is neither.
 */
const SPAN = /^(\d{1,9})(s|m|h|d|w)$/;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;
const ISO = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

export function parseTimeSpec(value: string, now: number): number | undefined {
  const text = value.trim();
  const span = SPAN.exec(text);
  if (span) return now - Number(span[1]) * UNIT_MS[span[2] as keyof typeof UNIT_MS];
  if (!ISO.test(text)) return undefined;
  const time = Date.parse(text);
  return Number.isNaN(time) ? undefined : time;
}
