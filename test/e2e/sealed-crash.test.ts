import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { http, postLog, putStatus, readAllEntries, runPath, sendEvents } from '../helpers/api.js';
import { startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';

// A real `tailwater serve` killed with SIGKILL right after each step of sealing a finished run
// (docs/STORAGE.md, "Sealed segments"), then started again: the run reads back whole, each
// entry once, and is sealed in the end.

const RUN = runPath('etl.crash', 'r1');

/** Polls `condition` every 100 ms until it holds, for `ms` at most. */
async function eventually(condition: () => Promise<boolean>, what: string, ms: number) {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen in ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** How the process ended, once it has (without signalling it). */
function exitOf(process: ServerProcess, ms: number): Promise<string | number> {
  const { child } = process;
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve(child.signalCode ?? child.exitCode!);
  }
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`still running after ${ms} ms`)), ms);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(signal ?? code ?? -1);
    });
  });
}

async function storage(url: string) {
  const answer = await http(url, 'GET', '/api/v1/stats');
  return (JSON.parse(answer.text) as { storage: Record<string, number> }).storage;
}

describe('sealing interrupted by SIGKILL', () => {
  const dirs: string[] = [];
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.stop('SIGKILL');
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  for (const step of ['read', 'written', 'verified', 'recorded', 'dropped']) {
    it(`loses and duplicates nothing when killed after "${step}"`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tailwater-seal-crash-'));
      dirs.push(dir);
      const env = { TAILWATER_SEAL_AFTER_SECONDS: '0', TAILWATER_SEAL_GRACE_SECONDS: '2' };
      server = await startServerProcess(['--data', dir], {
        ...env,
        TAILWATER_FAILPOINT_SEAL: step,
      });
      const url = server.url;
      await putStatus(url, RUN, 'running');
      let log = '';
      for (let n = 0; n < 60; n += 1) {
        const text = Array.from({ length: 40 }, (_, i) => `line ${n}.${i} of the run ✓\n`).join('');
        await postLog(url, RUN, text);
        log += text;
        if (n % 10 === 0) {
          expect((await sendEvents(url, RUN, [{ kind: 'metric', data: { n } }])).status).toBe(200);
        }
      }
      await putStatus(url, RUN, 'success');
      const before = await readAllEntries(url, RUN);
      // The server kills itself at the failpoint once the run is indexed and sealing begins.
      expect(await exitOf(server, 30_000)).toBe('SIGKILL');
      server = await startServerProcess(['--data', dir], env);
      await eventually(
        async () => {
          const now = await storage(server!.url);
          return now['segments']! > 0 && now['hotLogBytes'] === 0;
        },
        'sealing after the restart',
        30_000,
      );
      const after: Entry[] = await readAllEntries(server.url, RUN);
      expect(after).toEqual(before);
      const text = await http(server.url, 'GET', `${RUN}/log.txt`);
      expect(text.text).toBe(log);
      await server.stop();
    });
  }
});
