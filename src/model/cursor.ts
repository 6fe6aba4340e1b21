import { TailwaterError } from './errors.js';

const DIGITS = /^\d{1,15}$/;

/** Whether a value is a seq cursor as this server writes them. */
export function isCursor(value: string): boolean {
  return DIGITS.test(value.trim());
}

/** Parses a seq cursor: a non-negative integer, never clamped or guessed. */
export function parseCursor(value: string, what = 'cursor'): number {
  const trimmed = value.trim();
  if (!DIGITS.test(trimmed)) {
    throw new TailwaterError(
      'TW_BAD_CURSOR',
      `The ${what} must be a non-negative integer (was "${value}").`,
    );
  }
  return Number(trimmed);
}
