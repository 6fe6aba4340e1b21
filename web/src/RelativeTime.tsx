import { useEffect, useState } from 'react';
import { formatRelative } from './format.js';

/** How often relative times are worked out again ("3 min ago" becomes "4 min ago"). */
export const RELATIVE_TICK_MS = 15_000;

/** The clock relative times are shown against, ticking every `everyMs`. */
export function useClock(everyMs = RELATIVE_TICK_MS): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [everyMs]);
  return now;
}

/** "3 min ago", with the exact time on hover and for machines (`<time dateTime title>`). */
export function RelativeTime({ iso, now }: { iso: string | null; now: number }) {
  if (!iso) return <>—</>;
  const at = Date.parse(iso);
  return (
    <time dateTime={iso} title={new Date(at).toLocaleString()}>
      {formatRelative(at, now)}
    </time>
  );
}
