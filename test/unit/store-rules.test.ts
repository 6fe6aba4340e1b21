import { describe, expect, it } from 'vitest';
import { TailwaterError } from '../../src/model/errors.js';
import type { RunState, StoredEntry } from '../../src/store/rules.js';
import {
  batchSeqs,
  cancelNeeded,
  checkLogRetry,
  Numbering,
  planEventBatch,
  runTransition,
} from '../../src/store/rules.js';

// The backend-neutral store rules (docs/STORAGE.md), on their own: every backend asks them, so
// what they decide is what every backend does.

const running: RunState = {
  status: 'running',
  cancelRequested: false,
  startedAt: 1000,
  endedAt: null,
  meta: '{}',
};

function code(action: () => unknown): string | undefined {
  try {
    action();
  } catch (error) {
    return error instanceof TailwaterError ? error.code : 'not a TailwaterError';
  }
  return undefined;
}

describe('the run lifecycle', () => {
  it('creates a run as running, started now, with a status entry', () => {
    const { next, changed, statusEntry } = runTransition('r', undefined, {}, 5000, false);
    expect(next).toEqual({ ...running, startedAt: 5000 });
    expect(changed).toBe(true);
    expect(statusEntry).toBe('{"status":"running"}');
  });

  it('leaves a queued run unstarted, and starts it once it runs', () => {
    const queued = runTransition('r', undefined, { status: 'queued' }, 5000, false).next;
    expect(queued.startedAt).toBeNull();
    expect(runTransition('r', queued, { status: 'running' }, 6000, false).next.startedAt).toBe(
      6000,
    );
  });

  it('ends a run once, and keeps its first end time when it is set terminal again', () => {
    const ended = runTransition('r', running, { status: 'success' }, 7000, false).next;
    expect(ended.endedAt).toBe(7000);
    const again = runTransition('r', ended, { status: 'failed' }, 9000, false);
    expect(again.next.endedAt).toBe(7000);
    expect(again.statusEntry).toBe('{"status":"failed"}');
  });

  it('refuses to set an ended run back to a non-terminal status', () => {
    const ended = { ...running, status: 'success' as const, endedAt: 7000 };
    expect(code(() => runTransition('r', ended, { status: 'running' }, 8000, false))).toBe(
      'TW_STATUS_CONFLICT',
    );
  });

  it('changes meta without a status entry, and changes nothing when nothing differs', () => {
    const metaOnly = runTransition('r', running, { meta: { a: 1 } }, 8000, false);
    expect(metaOnly).toMatchObject({ changed: true, statusEntry: undefined });
    expect(metaOnly.next.meta).toBe('{"a":1}');
    expect(runTransition('r', running, { status: 'running' }, 8000, false)).toMatchObject({
      changed: false,
      statusEntry: undefined,
    });
  });

  it('writes a cancel request once, and refuses it for an unknown or ended run', () => {
    const cancelled = runTransition('r', running, {}, 8000, true);
    expect(cancelled.statusEntry).toBe('{"status":"running","cancelRequested":true}');
    expect(cancelNeeded('p', 'r', running)).toBe(true);
    expect(cancelNeeded('p', 'r', cancelled.next)).toBe(false);
    expect(code(() => cancelNeeded('p', 'r', undefined))).toBe('TW_RUN_NOT_FOUND');
    expect(code(() => cancelNeeded('p', 'r', { ...running, status: 'failed' }))).toBe(
      'TW_STATUS_CONFLICT',
    );
  });
});

describe('numbering', () => {
  it('hands out gapless seqs and places each log entry where the log ended, in UTF-8 bytes and line feeds', () => {
    const numbering = new Numbering(41, 10, 3);
    expect(numbering.next({ kind: 'log', body: '例\n', isLog: true })).toEqual({
      seq: 42,
      logOffset: 10,
      logLine: 3,
    });
    expect(numbering.next({ kind: 'progress', body: '{}', isLog: false })).toEqual({
      seq: 43,
      logOffset: null,
      logLine: null,
    });
    expect(numbering.next({ kind: 'log', body: 'z\n\n', isLog: true })).toEqual({
      seq: 44,
      logOffset: 14,
      logLine: 4,
    });
    expect([numbering.lastSeq, numbering.logBytes, numbering.logLines]).toEqual([44, 17, 6]);
  });
});

describe('producer ids', () => {
  const stored: StoredEntry = { seq: 7, kind: 'k', id: 'a', body: '{"n":1}', isLog: false };
  const lookup = (id: string) => (id === 'a' ? stored : undefined);

  it('takes a stored id sent with the same event as a retry, and numbers only the new events', () => {
    const plan = planEventBatch(
      [
        { kind: 'k', id: 'a', data: { n: 1 } },
        { kind: 'k', id: 'b', data: { n: 2 } },
        { kind: 'k', id: 'b', data: { n: 2 } },
        { kind: 'k', data: { n: 3 } },
      ],
      lookup,
    );
    expect(plan.fresh.map((entry) => entry.body)).toEqual(['{"n":2}', '{"n":3}']);
    expect(plan.duplicates).toBe(2);
    expect(batchSeqs(plan, [20, 21])).toEqual([7, 20, 20, 21]);
  });

  it('refuses an id sent again with another event, stored or earlier in the batch', () => {
    expect(code(() => planEventBatch([{ kind: 'k', id: 'a', data: { n: 2 } }], lookup))).toBe(
      'TW_ID_CONFLICT',
    );
    expect(
      code(() =>
        planEventBatch(
          [
            { kind: 'k', id: 'c', data: 1 },
            { kind: 'k', id: 'c', data: 2 },
          ],
          lookup,
        ),
      ),
    ).toBe('TW_ID_CONFLICT');
  });

  it('takes a log append again as a retry only with the same text in the same pieces', () => {
    const rows: StoredEntry[] = [
      { seq: 3, kind: 'log', id: 'x', body: 'a\n', isLog: true, logOffset: 0 },
      { seq: 4, kind: 'log', body: 'b\n', isLog: true, logOffset: 2 },
    ];
    expect(() => checkLogRetry(rows, [{ text: 'a\n', id: 'x' }, { text: 'b\n' }])).not.toThrow();
    expect(code(() => checkLogRetry(rows, [{ text: 'a\nb\n', id: 'x' }]))).toBe('TW_ID_CONFLICT');
  });
});
