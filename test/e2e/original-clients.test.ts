import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Run } from '../../src/model/run.js';
import { postLog, putStatus, readAllEntries, runPath, send, sendEvents } from '../helpers/api.js';
import { freePort } from '../helpers/net.js';
import {
  freightDeployViewer,
  openMetadataLiveLog,
  openMetadataLogPager,
  openMetadataStreamUrl,
  zenmlBrowserEventSource,
} from '../helpers/original-clients.js';
import type { FreightDeployViewer } from '../helpers/original-clients.js';
import { BIN, startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';

// Each seed system's own client, as it behaves, against a real `tailwater serve` (docs/API.md,
// "Dialects for the seed systems' own clients"): Freight's deploy page polling a deploy that
// `tailwater run` drives, OpenMetadata's live-log hook and log pager, and a ZenML browser
// EventSource that moved over from a ZenML server.

/** Streams end soon after a run finishes, and the store is polled often. */
const SERVER_ENV = { TAILWATER_FINISH_GRACE_SECONDS: '0.5', TAILWATER_POLL_SECONDS: '0.1' };

/** Freight writes times as naive UTC with six decimals and a literal Z. */
const FREIGHT_DATE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Waits (bounded in tries and time) until `check` holds; returns whether it did. */
async function until(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  stepMs = 25,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; i < 10_000 && Date.now() < deadline; i += 1) {
    if (await check()) return true;
    await sleep(stepMs);
  }
  return check();
}

async function getRun(server: string, pipeline: string, runId: string): Promise<Run | undefined> {
  const res = await fetch(`${server}${runPath(pipeline, runId)}`);
  if (res.status === 404) {
    await res.body?.cancel();
    return undefined;
  }
  expect(res.status).toBe(200);
  return (await res.json()) as Run;
}

/** The run's whole log as stored, byte for byte (docs/API.md, "Reading without streaming"). */
async function logText(server: string, pipeline: string, runId: string): Promise<string> {
  const res = await fetch(`${server}${runPath(pipeline, runId)}/log.txt`);
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer()).toString('utf8');
}

interface Cli {
  child: ChildProcess;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

describe("the seed systems' own clients against a real tailwater serve", () => {
  const servers: ServerProcess[] = [];
  const clis: Cli[] = [];
  const viewers: FreightDeployViewer[] = [];
  const stops: Array<() => void> = [];
  const dirs: string[] = [];

  function tempDir(prefix: string): string {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(dir);
    return dir;
  }

  async function startServer(args: string[]): Promise<ServerProcess> {
    const server = await startServerProcess(args, SERVER_ENV);
    servers.push(server);
    return server;
  }

  /** `tailwater run` as a deploy script's caller would start it. */
  function startRun(server: string, pipeline: string, runId: string, command: string[]): Cli {
    const child = spawn(
      process.execPath,
      [BIN, 'run', '--server', server, '--pipeline', pipeline, '--run-id', runId, '--', ...command],
      {
        env: { ...process.env, TAILWATER_SPOOL_DIR: join(tempDir('tailwater-run-spool-'), 's') },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stdout!.resume();
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const cli = { child, stderr: () => stderr, exited };
    clis.push(cli);
    return cli;
  }

  /** Opens the deploy page only once the deploy exists (Freight's UI links to existing ones). */
  async function openDeployPage(server: string, app: string, env: string, number: number) {
    expect(
      await until(
        async () => (await getRun(server, `${app}.${env}`, String(number)))?.status === 'running',
        10_000,
      ),
    ).toBe(true);
    const viewer = freightDeployViewer(`${server}/compat/freight`, app, env, number);
    viewers.push(viewer);
    return viewer;
  }

  afterEach(async () => {
    for (const viewer of viewers.splice(0)) viewer.stop();
    for (const stop of stops.splice(0)) stop();
    for (const cli of clis.splice(0)) {
      if (cli.child.exitCode === null && cli.child.signalCode === null) {
        cli.child.kill('SIGKILL');
        await cli.exited;
      }
    }
  });

  afterAll(async () => {
    for (const server of servers.splice(0)) await server.stop('SIGKILL');
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  describe("Freight's deploy page", () => {
    let server: ServerProcess;
    beforeAll(async () => {
      server = await startServer(['--data', tempDir('tailwater-freight-data-')]);
    });

    it("Freight's deploy page follows a live deploy started with tailwater run to its whole log and its final status", async () => {
      // Thirty numbered lines over about three seconds, some with multi-byte text.
      const script =
        'i=1; while [ $i -le 30 ]; do echo "deploying step $i: naïve ✓ — ünïcödé"; i=$((i+1)); sleep 0.1; done; echo "deploy complete"; exit 0';
      const cli = startRun(server.url, 'myapp.production', '7', ['sh', '-c', script]);
      const viewer = await openDeployPage(server.url, 'myapp', 'production', 7);

      await viewer.done;
      expect(await cli.exited, cli.stderr()).toEqual({ code: 0, signal: null });

      const log = await logText(server.url, 'myapp.production', '7');
      expect(log.startsWith(">> Running ['sh', '-c', ")).toBe(true);
      expect(log.endsWith('deploying step 30: naïve ✓ — ünïcödé\ndeploy complete\n')).toBe(true);
      expect(Buffer.from(viewer.text).equals(Buffer.from(log))).toBe(true);
      expect(viewer.lines).toEqual(log.split('\n').filter((line) => line !== ''));
      expect(viewer.statuses).toEqual(['in_progress', 'finished']);
      // It followed the deploy live: log arrived over several polls before the deploy finished.
      const livePolls = viewer.logRequests.filter((r) => r.chunks > 0 && !r.sentAfterTerminal);
      expect(livePolls.length).toBeGreaterThan(1);
      // The final drain ended on a request that found nothing new.
      expect(viewer.logRequests.at(-1)).toMatchObject({ chunks: 0, sentAfterTerminal: true });

      const deploy = viewer.deploy!;
      expect(deploy).toMatchObject({
        name: 'myapp/production#7',
        number: 7,
        environment: 'production',
        app: { name: 'myapp' },
        status: 'finished',
      });
      for (const date of [
        deploy.dateCreated,
        deploy.dateStarted,
        deploy.dateFinished,
        deploy.user.dateCreated,
      ]) {
        expect(date).toMatch(FREIGHT_DATE);
      }
      expect(deploy.duration).toBeGreaterThanOrEqual(2);
    });

    it("Freight's deploy page shows a deploy whose command exits 1 as failed, with the whole log", async () => {
      const script =
        'echo "migrating the database"; sleep 1; echo "error: migration 0042 failed" >&2; exit 1';
      const cli = startRun(server.url, 'myapp.production', '8', ['sh', '-c', script]);
      const viewer = await openDeployPage(server.url, 'myapp', 'production', 8);

      await viewer.done;
      expect(await cli.exited, cli.stderr()).toEqual({ code: 1, signal: null });

      const log = await logText(server.url, 'myapp.production', '8');
      expect(log.endsWith('migrating the database\nerror: migration 0042 failed\n')).toBe(true);
      expect(viewer.text).toBe(log);
      expect(viewer.statuses).toEqual(['in_progress', 'failed']);
      expect(viewer.deploy).toMatchObject({ name: 'myapp/production#8', status: 'failed' });
      expect(viewer.deploy!.dateFinished).toMatch(FREIGHT_DATE);
    });

    it("Freight's deploy page loads a finished deploy of over 1 MiB in one log request", async () => {
      const lines: string[] = [];
      let bytes = 0;
      for (let n = 1; bytes <= 1.1 * 1024 * 1024 && n < 100_000; n += 1) {
        const line = `${String(n).padStart(6, '0')} rsync myapp-${n % 97}.tar → prod: naïve ✓ 日本語 ${'x'.repeat(n % 50)}\n`;
        lines.push(line);
        bytes += Buffer.byteLength(line, 'utf8');
      }
      const whole = lines.join('');
      const run = runPath('big.prod', '1');
      await postLog(server.url, run, whole);
      await putStatus(server.url, run, 'success');
      const stored = await readAllEntries(server.url, run, 'kinds=log');
      expect(stored.length).toBeGreaterThan(1); // kept as several chunks

      const viewer = freightDeployViewer(`${server.url}/compat/freight`, 'big', 'prod', 1);
      viewers.push(viewer);
      await viewer.done;

      expect(Buffer.byteLength(whole, 'utf8')).toBeGreaterThan(1024 * 1024);
      expect(Buffer.from(viewer.text).equals(Buffer.from(whole))).toBe(true);
      expect(await logText(server.url, 'big.prod', '1')).toBe(whole);
      expect(viewer.statuses).toEqual(['finished']);
      // One request held every chunk; the drain after it found nothing and the same nextOffset.
      expect(viewer.logRequests.map(({ chunks, nextOffset }) => ({ chunks, nextOffset }))).toEqual([
        { chunks: stored.length, nextOffset: Buffer.byteLength(whole, 'utf8') },
        { chunks: 0, nextOffset: Buffer.byteLength(whole, 'utf8') },
      ]);
      expect(viewer.logRequests[0]!.url).toMatch(/\/deploys\/big\/prod\/1\/log\/\?offset=0$/);
    });

    it("Freight's Cancel button stops the command tailwater run is running, and the page ends on cancelled with the runner's cancel line", async () => {
      const cli = startRun(server.url, 'myapp.production', '9', ['sleep', '30']);
      const viewer = await openDeployPage(server.url, 'myapp', 'production', 9);
      // The page shows the deploy running, then someone clicks Cancel.
      expect(await until(() => viewer.text.startsWith('>> Running'), 10_000)).toBe(true);
      expect(viewer.statuses).toEqual(['in_progress']);
      await sleep(1000);
      const res = await viewer.cancel();
      expect(res.status).toBe(200);
      expect(((await res.json()) as { name: string }).name).toBe('myapp/production#9');

      await viewer.done;
      expect(await cli.exited, cli.stderr()).toEqual({ code: 130, signal: null });
      const log = await logText(server.url, 'myapp.production', '9');
      expect(log).toBe(">> Running ['sleep', '30']\n>> Task was cancelled\n");
      expect(viewer.text).toBe(log);
      expect(viewer.statuses).toEqual(['in_progress', 'cancelled']);
      expect((await getRun(server.url, 'myapp.production', '9'))?.status).toBe('cancelled');
    });
  });

  describe("OpenMetadata's live log and log pager", () => {
    it("OpenMetadata's live log follows a run to runFinished across a server restart with no duplicate and no gap", async () => {
      const port = await freePort();
      const data = tempDir('tailwater-om-data-');
      const args = ['--data', data, '--port', String(port)];
      let server = await startServer(args);
      const base = server.url;
      expect(base).toBe(`http://127.0.0.1:${port}`);

      const fqn = 'sample_data.ingest_metadata';
      const runId = 'scheduled__2026-08-10T00:00:00+00:00';
      const run = runPath(fqn, runId);
      await putStatus(base, run, 'running');

      const hook = openMetadataLiveLog(openMetadataStreamUrl(base, fqn, runId), {
        token: 'eyJhbGciOiJSUzI1NiJ9.om-bot.signature',
      });
      stops.push(() => hook.stop());

      // The ingestion writes a unique numbered line every 25 ms; an append that cannot reach
      // the server is retried with the same producer id, so the log holds each line once.
      const TOTAL = 150;
      const expected = Array.from(
        { length: TOTAL },
        (_, i) => `line ${String(i + 1).padStart(4, '0')} ${i % 5 === 0 ? 'naïve ✓' : 'ok'}\n`,
      );
      // Half the lines go in before the restart, the rest from while the server is down: the
      // producer waits for the stop there, however busy the machine is.
      const HALF = TOTAL / 2;
      let stopped!: () => void;
      const serverStopped = new Promise<void>((resolve) => (stopped = resolve));
      let refused = 0;
      const producing = (async () => {
        for (const [index, text] of expected.entries()) {
          if (index === HALF) await serverStopped;
          let stored = false;
          for (let attempt = 0; attempt < 200 && !stored; attempt += 1) {
            try {
              const res = await send(base, 'POST', `${run}/logs`, {
                text,
                id: `line-${index + 1}`,
              });
              stored = res.status === 200;
              await res.body?.cancel();
            } catch {
              // the server is down: try again shortly
              refused += 1;
            }
            if (!stored) await sleep(100);
          }
          if (!stored) throw new Error(`line ${index + 1} could not be appended`);
          await sleep(25);
        }
      })();

      // The hook shows the run live; then the server restarts on the same port and data.
      expect(await until(() => hook.text.includes('line 0040 '), 15_000), hook.text).toBe(true);
      expect(await server.stop('SIGTERM')).toBe(0);
      stopped();
      // Appends meet the closed port before the server is back.
      expect(await until(() => refused > 0, 10_000)).toBe(true);
      server = await startServer(args);
      expect(server.url).toBe(base);

      await producing;
      await putStatus(base, run, 'success');
      const result = await hook.done;

      const log = await logText(base, fqn, runId);
      expect(log).toBe(expected.join(''));
      expect(result, JSON.stringify(hook.connections)).toEqual({
        stoppedBy: 'complete',
        reason: 'runFinished',
      });
      expect(hook.text === log, JSON.stringify(hook.connections)).toBe(true);
      expect(hook.truncated).toBe(false);
      // The server said it was restarting; the hook came back with its cursor.
      expect(hook.completes).toEqual(['maxDuration', 'runFinished']);
      const resumed = hook.connections.slice(1);
      expect(resumed.length).toBeGreaterThanOrEqual(1);
      expect(resumed.every((c) => c.after !== undefined && /[?&]after=\d+$/.test(c.url))).toBe(
        true,
      );
      expect(resumed.some((c) => c.httpStatus === 200)).toBe(true);
      // The reconnect after `maxDuration` was immediate.
      expect(resumed[0]!.delayMs).toBe(0);
    });

    it("OpenMetadata's log pager loads every page of a run whose seq count exceeds its byte count", async () => {
      const server = await startServer(['--data', tempDir('tailwater-om-pager-data-')]);
      const fqn = 'sample_data.ingest_usage';
      const run = runPath(fqn, 'r1');
      await putStatus(server.url, run, 'running');
      // 2,500 log lines of one character (a few of two bytes), each its own chunk, and 10,000
      // progress events between them: the last seq is far above the log's length in bytes.
      const CHUNKS = 2500;
      const texts: string[] = [];
      for (let n = 0; n < CHUNKS; n += 1) {
        const text = `${n % 100 === 99 ? 'é' : String.fromCharCode(97 + (n % 26))}\n`;
        texts.push(text);
        await postLog(server.url, run, text);
        if (n % 250 === 0) {
          const events = Array.from({ length: 1000 }, (_, i) => ({
            kind: 'progress',
            data: { n, i },
          }));
          expect((await sendEvents(server.url, run, events)).status).toBe(200);
        }
      }
      await putStatus(server.url, run, 'success');
      const stored = await getRun(server.url, fqn, 'r1');
      expect(stored!.logBytes).toBe(Buffer.byteLength(texts.join(''), 'utf8'));
      expect(stored!.lastSeq).toBeGreaterThan(2 * stored!.logBytes);
      expect((await readAllEntries(server.url, run, 'kinds=log')).length).toBe(CHUNKS);

      const paged = await openMetadataLogPager(server.url, fqn);

      expect(paged.text).toBe(await logText(server.url, fqn, 'r1'));
      expect(paged.text).toBe(texts.join(''));
      // The default page is 1000 chunks: three pages, the last one the tail.
      expect(paged.pages.length).toBeGreaterThan(1);
      expect(paged.pages.map((page) => page.after)).toEqual([
        String(Buffer.byteLength(texts.slice(0, 1000).join(''), 'utf8')),
        String(Buffer.byteLength(texts.slice(0, 2000).join(''), 'utf8')),
        undefined,
      ]);
      expect(new Set(paged.pages.map((page) => page.total))).toEqual(
        new Set([String(stored!.logBytes)]),
      );
    });
  });

  describe('a ZenML browser EventSource', () => {
    it('A ZenML browser EventSource moved over from a ZenML server with a Redis stream id as Last-Event-ID gets the whole stream', async () => {
      const server = await startServer(['--data', tempDir('tailwater-zenml-data-')]);
      const runId = randomUUID();
      const publish = async (from: number, count: number) => {
        const events = Array.from({ length: count }, (_, i) => ({
          pipeline_run_id: runId,
          step_name: 'trainer',
          kind: (from + i) % 3 === 0 ? 'metric' : 'progress',
          payload: { index: from + i, loss: 1 / (from + i + 1), note: 'naïve ✓' },
        }));
        const res = await send(server.url, 'POST', `/compat/zenml/api/v1/runs/${runId}/events`, {
          events,
        });
        expect(res.status).toBe(200);
        expect(((await res.json()) as { count: number }).count).toBe(count);
        return events;
      };

      // Ten events before the browser comes over from the old server, ten while it watches.
      const published = await publish(0, 10);
      const subscriber = zenmlBrowserEventSource(
        `${server.url}/compat/zenml/api/v1/runs/${runId}/events/stream`,
        { kinds: ['progress', 'metric'], movedLastEventId: '1718000000000-0' },
      );
      stops.push(() => subscriber.close());
      expect(await until(() => subscriber.received.length >= 11, 10_000)).toBe(true);
      published.push(...(await publish(10, 10)));
      expect(await until(() => subscriber.received.length >= 21, 10_000)).toBe(true);
      // An unknown ZenML run is filed under the pipeline `zenml` (docs/API.md, "ZenML").
      await putStatus(server.url, runPath('zenml', runId), 'success');
      await subscriber.done;

      const received = subscriber.received;
      expect(received[0]!.type).toBe('gap');
      expect(JSON.parse(received[0]!.data)).toEqual({ reason: 'reset' });
      const events = received.slice(1, -1);
      expect(events.map((e) => e.type)).toEqual(published.map((e) => e.kind));
      expect(
        events.map((e) => JSON.parse(e.data) as { pipeline_run_id: string; payload: unknown }),
      ).toEqual(
        published.map((e) =>
          expect.objectContaining({
            pipeline_run_id: runId,
            step_name: 'trainer',
            payload: e.payload,
          }),
        ),
      );
      const ids = events.map((e) => Number(e.id));
      expect(ids.every((id, i) => Number.isSafeInteger(id) && (i === 0 || id > ids[i - 1]!))).toBe(
        true,
      );
      expect(received.at(-1)).toMatchObject({ type: 'end', data: '{}' });
      expect(subscriber.opens).toBe(1);
    });
  });
});
