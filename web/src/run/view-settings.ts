import { useState } from 'react';

/** How each line's time is shown (docs/DASHBOARD.md, "The log"). */
export type TimestampMode = 'off' | 'clock' | 'elapsed';
export const TIMESTAMP_MODES: readonly TimestampMode[] = ['off', 'clock', 'elapsed'];

export const TIMESTAMPS_KEY = 'tailwater.log.timestamps';
export const WRAP_KEY = 'tailwater.log.wrap';

function storage(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    // Storage refused (a sandboxed frame, a privacy setting): the choice lasts the page.
    return null;
  }
}

/** One of `allowed`, remembered by this browser under `key` (localStorage). */
export function useStoredChoice<T extends string>(
  key: string,
  allowed: readonly T[],
  fallback: T,
): [T, (value: T) => void] {
  const [value, setValue] = useState<T>(() => {
    const stored = storage()?.getItem(key);
    return allowed.find((choice) => choice === stored) ?? fallback;
  });
  const choose = (next: T) => {
    setValue(next);
    try {
      storage()?.setItem(key, next);
    } catch {
      // Full or refused: remembered for this page only.
    }
  };
  return [value, choose];
}
