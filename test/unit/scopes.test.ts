import { describe, expect, it } from 'vitest';
import {
  allows,
  globMatches,
  GrantsError,
  parseGrants,
  resourceOf,
} from '../../src/model/scopes.js';

// What a token's `tailwater` claim allows (docs/SECURITY.md, "Tokens and scopes").

describe('globMatches', () => {
  it.each([
    ['*', 'pipeline:etl.daily', true],
    ['pipeline:*', 'pipeline:etl.daily', true],
    ['pipeline:*', 'topic:iceberg', false],
    ['pipeline:etl.*', 'pipeline:etl.daily', true],
    ['pipeline:etl.*', 'pipeline:etl', false],
    ['pipeline:etl.*', 'pipeline:etlx.daily', false],
    ['pipeline:*.daily', 'pipeline:warehouse.ingest.daily', true],
    ['pipeline:etl.daily', 'pipeline:etl.daily', true],
    ['pipeline:etl.daily', 'pipeline:etl.daily2', false],
    // Regular-expression characters are themselves.
    ['pipeline:a.(b)+', 'pipeline:a.(b)+', true],
    ['pipeline:a.(b)+', 'pipeline:aX(b)', false],
    ['topic:a*b*c', 'topic:aXXbYYc', true],
    ['topic:a*b*c', 'topic:aXXcYYb', false],
  ])('%s against %s: %s', (pattern, name, expected) => {
    expect(globMatches(pattern, name)).toBe(expected);
  });

  it('answers a pattern built to make a backtracking matcher slow at once', () => {
    const pattern = `${'*a'.repeat(200)}*b`;
    const name = 'a'.repeat(300);
    const started = process.cpuUsage();
    expect(globMatches(pattern, name)).toBe(false);
    // Far below what an exponential or high-polynomial match would take, in CPU time: a busy
    // machine that keeps this process waiting does not count.
    const used = process.cpuUsage(started);
    expect((used.user + used.system) / 1000).toBeLessThan(1000);
  });
});

describe('parseGrants', () => {
  it('reads read, write and admin, and grants nothing without the claim', () => {
    expect(parseGrants({ read: ['pipeline:*'], write: ['topic:x'], admin: false })).toEqual({
      read: ['pipeline:*'],
      write: ['topic:x'],
      admin: false,
    });
    expect(parseGrants(undefined)).toEqual({ read: [], write: [], admin: false });
  });

  it.each([
    ['a string', 'read'],
    ['a list', []],
    ['an unknown field', { read: [], delete: ['*'] }],
    ['a pattern that is not a string', { read: [1] }],
    ['an empty pattern', { read: [''] }],
    ['admin not a boolean', { admin: 'yes' }],
    ['too many patterns', { read: Array.from({ length: 257 }, (_, i) => `topic:${i}`) }],
  ])('refuses %s', (_what, claim) => {
    expect(() => parseGrants(claim)).toThrow(GrantsError);
  });
});

describe('allows', () => {
  const grants = parseGrants({ read: ['pipeline:etl.*'], write: ['topic:iceberg'] });
  it('reads what read patterns match, writes what write patterns match, and neither implies the other', () => {
    expect(
      allows(grants, 'read', resourceOf({ type: 'run', pipeline: 'etl.daily', runId: 'r' })),
    ).toBe(true);
    expect(allows(grants, 'write', 'pipeline:etl.daily')).toBe(false);
    expect(allows(grants, 'write', resourceOf({ type: 'topic', topic: 'iceberg' }))).toBe(true);
    expect(allows(grants, 'read', 'topic:iceberg')).toBe(false);
    expect(allows(grants, 'admin', 'pipeline:etl.daily')).toBe(false);
  });

  it('lets an admin do everything', () => {
    const admin = parseGrants({ admin: true });
    for (const action of ['read', 'write', 'admin'] as const) {
      expect(allows(admin, action, 'pipeline:anything')).toBe(true);
    }
  });
});
