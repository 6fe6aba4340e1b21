/** Lines of the log, by their numbers (1-based, the log's own), `first <= last`. */
export interface LineRange {
  first: number;
  last: number;
}

/** `#L120` or `#L120-L140` (either order), as GitHub writes them; null for anything else. */
export function lineRangeOf(hash: string): LineRange | null {
  const match = /^#L(\d{1,15})(?:-L(\d{1,15}))?$/.exec(hash);
  if (!match) return null;
  const a = Number(match[1]);
  const b = match[2] === undefined ? a : Number(match[2]);
  const [first, last] = a <= b ? [a, b] : [b, a];
  return first >= 1 ? { first, last } : null;
}

export function lineHash(range: LineRange): string {
  return range.first === range.last ? `#L${range.first}` : `#L${range.first}-L${range.last}`;
}
