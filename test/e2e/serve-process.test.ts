import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { sendLog, sendStatus } from '../helpers/api.js';
import { openSse } from '../helpers/sse.js';
import type { SseReader } from '../helpers/sse.js';
import { startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('tailwater serve as a process', () => {
  let server: ServerProcess | undefined;
  let reader: SseReader | undefined;
  const dirs: string[] = [];
  afterEach(async () => {
    reader?.close();
    await server?.stop('SIGKILL');
    server = undefined;
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('ends the streams of a run set to success with end runFinished after finishGraceSeconds', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tailwater-finish-'));
    dirs.push(dir);
    server = await startServerProcess(['--data', dir], {
      TAILWATER_FINISH_GRACE_SECONDS: '0.6',
      TAILWATER_POLL_SECONDS: '0.05',
    });
    const run = '/api/v1/pipelines/finish.test/runs/r1';
    await sendLog(server, run, 'hello\n');
    reader = await openSse(`${server.url}${run}/stream`);
    await reader.waitFor((events) => events.some((e) => e.event === 'log'));
    // From before the request: the server's grace begins when it stores the status, which a
    // busy machine may take a while to answer for.
    const finishedAt = Date.now();
    const res = await sendStatus(server, run, 'success');
    expect(res.status).toBe(200);
    await reader.waitFor((events) =>
      events.some((e) => e.event === 'status' && e.data.includes('success')),
    );
    await reader.waitFor((events) => events.some((e) => e.event === 'end'), 10_000);
    const elapsed = Date.now() - finishedAt;
    await reader.closed;
    const end = reader.events.find((e) => e.event === 'end')!;
    expect(JSON.parse(end.data)).toEqual({ reason: 'runFinished', status: 'success', lastSeq: 3 });
    // Not before the grace period: the run's last flush still had time to arrive.
    expect(elapsed).toBeGreaterThanOrEqual(590);
    expect(reader.events.at(-1)?.event).toBe('end');
  });

  it('sends end shutdown to every viewer on SIGTERM and exits 0', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tailwater-sigterm-'));
    dirs.push(dir);
    server = await startServerProcess(['--data', dir]);
    const readers = await Promise.all(
      [1, 2, 3].map((n) => openSse(`${server!.url}/api/v1/pipelines/p/runs/r${n}/stream`)),
    );
    // openSse resolves on the response headers: every stream is open.
    for (const r of readers) expect(r.status).toBe(200);
    const code = await server.stop('SIGTERM');
    server = undefined;
    expect(code).toBe(0);
    for (const r of readers) {
      await r.closed;
      const end = r.events.find((e) => e.event === 'end');
      expect(JSON.parse(end!.data)).toMatchObject({ reason: 'shutdown' });
    }
  });

  it('npm start serves the demo on 127.0.0.1:8585 with log lines arriving live', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tailwater-npm-start-'));
    dirs.push(dir);
    const child = spawn('npm', ['start'], {
      cwd: ROOT,
      env: { ...process.env, TAILWATER_DATA: dir, TAILWATER_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) =>
      child.once('exit', (code) => resolve(code)),
    );
    try {
      const deadline = Date.now() + 30_000;
      while (!output.includes('listening on http://127.0.0.1:8585') && Date.now() < deadline) {
        if (child.exitCode !== null) throw new Error(`npm start exited:\n${output}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(output).toContain('listening on http://127.0.0.1:8585');
      reader = await openSse(
        'http://127.0.0.1:8585/api/v1/pipelines/demo.nightly_etl/runs/latest/stream?from=latest',
      );
      expect(reader.status).toBe(200);
      // Lines arrive live: the first was here before the demo had written the second.
      const arrivals: number[] = [];
      await reader.waitFor((events) => {
        const logs = events.filter((e) => e.event === 'log').length;
        while (arrivals.length < logs) arrivals.push(Date.now());
        return logs >= 2;
      }, 10_000);
      const [first, second] = reader.events
        .filter((e) => e.event === 'log')
        .map((e) => JSON.parse(e.data) as { text: string; time: string });
      expect(arrivals[0]!).toBeLessThan(Date.parse(second!.time));
      expect(first!.text).toMatch(/INFO/);
    } finally {
      reader?.close();
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
    }
  });
});
