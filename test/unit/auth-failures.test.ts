import { describe, expect, it } from 'vitest';
import { AuthFailures } from '../../src/http/auth-failures.js';

// The failed-authentication limit's windows, on a clock of the test's own.

describe('AuthFailures', () => {
  it('blocks an address past max failures until its window ends, then lets it try again', () => {
    let now = 1_000_000;
    const failures = new AuthFailures(2, 60_000, () => now);
    failures.record('a');
    expect(failures.retryAfter('a')).toBe(0);
    failures.record('a');
    expect(failures.retryAfter('a')).toBe(60);
    now += 45_500;
    expect(failures.retryAfter('a')).toBe(15);
    expect(failures.retryAfter('b')).toBe(0);
    now += 15_000;
    expect(failures.retryAfter('a')).toBe(0);
    failures.record('a');
    expect(failures.retryAfter('a')).toBe(0);
  });

  it('remembers at most 10,000 addresses, however many fail', () => {
    const now = 0;
    const failures = new AuthFailures(1, 60_000, () => now);
    for (let i = 0; i < 25_000; i += 1) failures.record(`10.0.${i >> 8}.${i & 255}:${i}`);
    const size = (failures as unknown as { windows: Map<string, unknown> }).windows.size;
    expect(size).toBeLessThanOrEqual(10_000);
    // The newest are remembered.
    expect(failures.retryAfter(`10.0.${24_999 >> 8}.${24_999 & 255}:24999`)).toBe(60);
  });
});
