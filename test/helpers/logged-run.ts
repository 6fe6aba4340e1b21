import type { LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, expect } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { createTestApp } from './app.js';
import type { TestApp } from './app.js';

/** A log piece as `POST …/logs` takes it in JSON. */
export interface LogPiece {
  text: string;
  step?: string;
}

/** A run written before each test (one append per piece) on a fresh app, and how to read it. */
export interface LoggedRun {
  /** The app of the test under way. */
  readonly t: TestApp;
  /** `GET <run>/log.txt?<query>`. */
  logTxt(query: string, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
  /** The run's log entries, as `GET <run>/entries?kinds=log` gives them. */
  logEntries(): Promise<Entry[]>;
}

/**
 * Registers the hooks that give each test of the file a fresh app (on the run's backend pair)
 * whose run `run` (an API path) holds `pieces`, and closes it after.
 */
export function loggedRun(run: string, pieces: readonly LogPiece[]): LoggedRun {
  let app: TestApp | undefined;
  beforeEach(async () => {
    app = await createTestApp();
    for (const piece of pieces) {
      const res = await app.app.inject({ method: 'POST', url: `${run}/logs`, payload: piece });
      expect(res.statusCode).toBe(200);
    }
  });
  afterEach(async () => {
    await app?.close();
  });
  const current = () => {
    if (!app) throw new Error('loggedRun: used outside a test');
    return app;
  };
  return {
    get t() {
      return current();
    },
    logTxt: (query, headers = {}) =>
      current().app.inject({ method: 'GET', url: `${run}/log.txt?${query}`, headers }),
    logEntries: async () => {
      const res = await current().app.inject({ method: 'GET', url: `${run}/entries?kinds=log` });
      return res.json<{ entries: Entry[] }>().entries;
    },
  };
}
