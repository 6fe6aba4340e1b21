import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TailwaterClient } from '../../src/client/http-client.js';
import { freePort } from '../helpers/net.js';
import { BIN, startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';

/** Streams end soon after a run finishes, so `tail` exits quickly. */
const SERVER_ENV = { TAILWATER_FINISH_GRACE_SECONDS: '0.3', TAILWATER_POLL_SECONDS: '0.1' };

interface Cli {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves once `predicate` holds for the output so far; fails after `timeoutMs`. */
  waitFor(
    predicate: (stdout: string, stderr: string) => boolean,
    timeoutMs?: number,
  ): Promise<void>;
  /** The exit code (or the signal's name); the process is killed if it runs past `timeoutMs`. */
  exited(timeoutMs?: number): Promise<number | string>;
}

/** Runs the real `bin/tailwater` with `args`, as a user would. */
function spawnCli(args: string[], env: Record<string, string> = {}): Cli {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, TAILWATER_SERVER: '', TAILWATER_TOKEN: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const listeners = new Set<() => void>();
  const notify = () => listeners.forEach((listener) => listener());
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    notify();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    notify();
  });
  const exit = new Promise<number | string>((resolve) =>
    child.once('close', (code, signal) => resolve(code ?? signal ?? -1)),
  );
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    waitFor(predicate, timeoutMs = 20_000) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!predicate(stdout, stderr)) return;
          clearTimeout(timer);
          listeners.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`timed out waiting; stdout:\n${stdout}\nstderr:\n${stderr}`));
        }, timeoutMs);
        listeners.add(check);
        void exit.then(() => {
          if (!listeners.has(check)) return;
          check();
          if (listeners.has(check)) {
            clearTimeout(timer);
            listeners.delete(check);
            reject(new Error(`exited while waiting; stdout:\n${stdout}\nstderr:\n${stderr}`));
          }
        });
        check();
      });
    },
    exited(timeoutMs = 60_000) {
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      return exit.finally(() => clearTimeout(timer));
    },
  };
}

/** Runs a command to its end. */
async function runCli(args: string[], env: Record<string, string> = {}) {
  const cli = spawnCli(args, env);
  const code = await cli.exited(30_000);
  return { code, stdout: cli.stdout(), stderr: cli.stderr() };
}

describe('the tailwater command line against a real server', () => {
  let server: ServerProcess;
  let client: TailwaterClient;
  let dir: string;
  const running: Cli[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tailwater-cli-'));
    server = await startServerProcess(['--data', dir], SERVER_ENV);
    client = new TailwaterClient({ server: server.url });
  });

  afterEach(() => {
    for (const cli of running.splice(0)) if (cli.child.exitCode === null) cli.child.kill('SIGKILL');
  });

  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const cli = (args: string[]) => {
    const started = spawnCli([...args, '--server', server.url]);
    running.push(started);
    return started;
  };

  it('`tail` of the latest run prints its log as it arrives and exits 0 when it succeeds', async () => {
    await client.setStatus('cli.ok', 'r1', 'success'); // an older run: `latest` must not pick it
    await client.setStatus('cli.ok', 'r2', 'running');
    const tail = cli(['tail', 'cli.ok']);
    await tail.waitFor((out) => out.includes('[status] {"status":"running"}\n'));

    await client.appendLog('cli.ok', 'r2', 'alpha\n');
    await tail.waitFor((out) => out.includes('alpha\n'));
    await client.appendEvents({ pipeline: 'cli.ok', runId: 'r2' }, [
      { kind: 'progress', data: { pct: 50 }, step: 'train' },
    ]);
    await client.appendLog('cli.ok', 'r2', 'beta ');
    await client.appendLog('cli.ok', 'r2', 'gamma\n');
    await client.setStatus('cli.ok', 'r2', 'success');

    expect(await tail.exited()).toBe(0);
    expect(tail.stdout()).toBe(
      '[status] {"status":"running"}\n' +
        'alpha\n' +
        '[progress step=train] {"pct":50}\n' +
        'beta gamma\n' +
        '[status] {"status":"success"}\n',
    );
    expect(tail.stderr()).toBe('');
  });

  it('`tail` exits 1 when the run fails, and `--json` prints every entry as one JSON line', async () => {
    await client.setStatus('cli.fail', 'r1', 'running');
    const tail = cli(['tail', 'cli.fail', 'r1', '--json']);
    await tail.waitFor((out) => out.includes('"running"'));
    await client.appendLog('cli.fail', 'r1', 'Traceback…\n');
    // A number past 2^53 is printed as it was written, not as JavaScript would round it.
    const posted = await fetch(`${server.url}/api/v1/pipelines/cli.fail/runs/r1/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"events":[{"kind":"commit","data":{"snapshotId":1234567890123456789}}]}',
    });
    expect(posted.status).toBe(200);
    await client.setStatus('cli.fail', 'r1', 'failed');

    expect(await tail.exited()).toBe(1);
    const lines = tail.stdout().trimEnd().split('\n');
    const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(entries.map((e) => e['seq'])).toEqual([1, 2, 3, 4]);
    expect(entries[1]).toMatchObject({ kind: 'log', text: 'Traceback…\n', offset: 0 });
    expect(lines[2]).toContain('"data":{"snapshotId":1234567890123456789}');
    expect(entries[3]).toMatchObject({ kind: 'status', data: { status: 'failed' } });
    expect(tail.stderr()).toMatch(/run r1 of cli\.fail finished: failed/);
  });

  it('`tail --tail 1 --kinds log` starts with the last log entry only', async () => {
    for (const text of ['one\n', 'two\n', 'three\n'])
      await client.appendLog('cli.last', 'r1', text);
    await client.setStatus('cli.last', 'r1', 'success');
    const result = await runCli([
      'tail',
      'cli.last',
      'latest',
      '--tail',
      '1',
      '--kinds',
      'log',
      '--server',
      server.url,
    ]);
    expect(result).toEqual({ code: 0, stdout: 'three\n', stderr: '' });
  });

  it('`tail --lines 2` starts with the last two lines of the log (cut inside entries), then follows', async () => {
    await client.setStatus('cli.lines', 'r1', 'running');
    // Five lines over two entries, the last without its line feed yet; an event before the cut.
    await client.appendLog('cli.lines', 'r1', 'one\ntwo\nthr');
    await client.appendEvents({ pipeline: 'cli.lines', runId: 'r1' }, [
      { kind: 'progress', data: { pct: 10 } },
    ]);
    await client.appendLog('cli.lines', 'r1', 'ee\nfour\nfi');
    const tail = cli(['tail', 'cli.lines', 'r1', '--lines', '2']);
    await tail.waitFor((out) => out === 'four\nfi');
    // Only what is written after the lines read comes next, once.
    await client.appendLog('cli.lines', 'r1', 've\nsix\n');
    await client.appendEvents({ pipeline: 'cli.lines', runId: 'r1' }, [
      { kind: 'progress', data: { pct: 90 } },
    ]);
    await client.setStatus('cli.lines', 'r1', 'success');
    expect(await tail.exited()).toBe(0);
    expect(tail.stdout()).toBe(
      'four\nfive\nsix\n[progress] {"pct":90}\n[status] {"status":"success"}\n',
    );
    expect(tail.stderr()).toBe('');

    // A run with no log yet: no lines to start with, so everything from its start.
    await client.setStatus('cli.lines', 'r2', 'running');
    const empty = cli(['tail', 'cli.lines', 'r2', '--lines', '5']);
    await empty.waitFor((out) => out.includes('running'));
    await client.appendLog('cli.lines', 'r2', 'first\n');
    await client.setStatus('cli.lines', 'r2', 'failed');
    expect(await empty.exited()).toBe(1);
    expect(empty.stdout()).toBe(
      '[status] {"status":"running"}\nfirst\n[status] {"status":"failed"}\n',
    );
  });

  it('`tail` exits 130 on Ctrl-C (SIGINT)', async () => {
    await client.setStatus('cli.int', 'r1', 'running');
    const tail = cli(['tail', 'cli.int', 'r1']);
    await tail.waitFor((out) => out.includes('running'));
    tail.child.kill('SIGINT');
    expect(await tail.exited()).toBe(130);
  });

  it('`tail` stops quietly (141, no stack trace) when the reader of its output goes away', async () => {
    await client.setStatus('cli.pipe', 'r1', 'running');
    const tail = cli(['tail', 'cli.pipe', 'r1']);
    await tail.waitFor((out) => out.includes('running'));
    // Like `tailwater tail … | head -1`: the reader closes its end of the pipe.
    tail.child.stdout!.destroy();
    for (let n = 0; n < 50 && tail.child.exitCode === null; n += 1) {
      await client.appendLog('cli.pipe', 'r1', `line ${n}\n`);
    }
    expect(await tail.exited()).toBe(141);
    expect(tail.stderr()).toBe('');
  });

  it('`publish` stores an event and prints its seq; `runs` shows what was written', async () => {
    const first = await runCli([
      'publish',
      'cli.pub',
      'r1',
      '--kind',
      'progress',
      '--step',
      'train',
      '--correlation-id',
      'gen-1',
      '{"pct":40}',
      '--server',
      server.url,
    ]);
    expect(first.code).toBe(0);
    expect(first.stderr).toBe('');
    expect(first.stdout).toMatch(/^\d+\n$/);
    const seq = Number(first.stdout);

    // The same producer id again: acknowledged with the same seq, stored once.
    const args = ['publish', 'cli.pub', 'r1', '--kind', 'note', '--id', 'n-1', '"hello"'];
    const once = await runCli([...args, '--server', server.url]);
    const twice = await runCli([...args, '--server', server.url]);
    expect(once.code).toBe(0);
    expect(twice.code).toBe(0);
    expect(twice.stdout).toBe(once.stdout);
    expect(twice.stderr).toMatch(/already stored/);

    const topic = await runCli(
      ['publish', '--topic', 'cli-topic', '--kind', 'mutation', '{"table":"t1"}'],
      { TAILWATER_SERVER: server.url }, // the server from the environment this time
    );
    expect(topic).toEqual({ code: 0, stdout: '1\n', stderr: '' });

    const { entries } = await client.entries({ pipeline: 'cli.pub', runId: 'r1' });
    const progress = entries.find((e) => e.seq === seq);
    expect(progress).toMatchObject({
      kind: 'progress',
      data: { pct: 40 },
      step: 'train',
      correlationId: 'gen-1',
    });
    expect(entries.filter((e) => e.kind === 'note')).toHaveLength(1);
    expect((await client.entries({ topic: 'cli-topic' })).entries).toMatchObject([
      { seq: 1, kind: 'mutation', data: { table: 't1' } },
    ]);

    const pipelines = await runCli(['runs', '--server', server.url]);
    expect(pipelines.code).toBe(0);
    const header = pipelines.stdout.split('\n')[0]!;
    expect(header).toMatch(/^PIPELINE +RUNS +LAST RUN +STATUS +STARTED$/);
    const row = pipelines.stdout.split('\n').find((line) => line.startsWith('cli.pub '));
    expect(row).toMatch(/^cli\.pub +1 +r1 +running /);
    // Aligned: each column starts at the same place in the header and in the row.
    expect(row!.indexOf(' r1 ') + 1).toBe(header.indexOf('LAST RUN'));

    const runs = await runCli(['runs', 'cli.pub', '--server', server.url]);
    expect(runs.code).toBe(0);
    const lines = runs.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^RUN ID +STATUS +STARTED +DURATION +LOG$/);
    expect(lines[1]).toMatch(/^r1 +running +\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ +\d+s\+ +0 B$/);
    expect(lines).toHaveLength(2);

    const json = await runCli(['runs', 'cli.pub', '--json', '--server', server.url]);
    expect(json.code).toBe(0);
    const body = JSON.parse(json.stdout) as { runs: Array<Record<string, unknown>> };
    expect(body.runs).toHaveLength(1);
    expect(body.runs[0]).toMatchObject({ pipeline: 'cli.pub', runId: 'r1', status: 'running' });
    expect(body.runs[0]!['lastSeq']).toBe(entries.at(-1)!.seq);
  });

  it('`runs <fqn>` lists runs newest first, filtered by --status and cut by --limit', async () => {
    await client.setStatus('cli.many', 'a', 'success');
    await client.setStatus('cli.many', 'b', 'failed');
    await client.setStatus('cli.many', 'c', 'success');
    const all = await runCli(['runs', 'cli.many', '--server', server.url]);
    expect(
      all.stdout
        .split('\n')
        .slice(1, 4)
        .map((line) => line.split(' ')[0]),
    ).toEqual(['c', 'b', 'a']);
    const ok = await runCli([
      'runs',
      'cli.many',
      '--status',
      'success',
      '--limit',
      '1',
      '--json',
      '--server',
      server.url,
    ]);
    expect(ok.code).toBe(0);
    expect(
      (JSON.parse(ok.stdout) as { runs: Array<{ runId: string }> }).runs.map((r) => r.runId),
    ).toEqual(['c']);
  });

  it('a bad JSON argument, or another bad argument, exits 2 with one line and stores nothing', async () => {
    const bad = await runCli([
      'publish',
      'cli.bad',
      'r1',
      '--kind',
      'k',
      '{"pct":',
      '--server',
      server.url,
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toMatch(/^tailwater: the event data is not valid JSON .*\n$/);
    expect(bad.stderr.trimEnd().split('\n')).toHaveLength(1);

    const others = [
      ['publish', 'cli.bad', 'r1', '--kind', 'status', '{}'], // reserved kind
      ['publish', 'cli.bad', '--kind', 'k', '{}'], // missing run id
      ['publish', 'cli.bad', 'r1', '{}'], // missing --kind
      ['tail', 'cli.bad', '--tail', 'many'],
      ['tail', 'cli.bad', '--tail', '2', '--from-start'],
      ['tail', 'cli.bad', '--lines', '2', '--tail', '2'],
      ['tail', 'cli.bad', '--lines', '2', '--json'],
      ['tail', 'cli.bad', '--lines', '-1'],
      ['runs', 'cli.bad', '--status', 'bogus'],
      ['runs', 'cli.bad', '--limit', '0'],
      ['runs', '--server', 'not a url'],
    ];
    for (const args of others) {
      const result = await runCli(
        args.includes('--server') ? args : [...args, '--server', server.url],
      );
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(result.stderr, args.join(' ')).not.toMatch(/\n\s+at /);
    }
    expect((await client.listPipelines()).map((p) => p.fqn)).not.toContain('cli.bad');
  });

  it('an unreachable server gets one clear line and exit 1', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    for (const args of [
      ['runs'],
      ['runs', 'cli.x'],
      ['publish', 'cli.x', 'r1', '--kind', 'k', '{}'],
      ['tail', 'cli.x'],
      ['tail', 'cli.x', 'r1'],
    ]) {
      const result = await runCli([...args, '--server', closed]);
      expect(result.code, args.join(' ')).toBe(1);
      expect(result.stdout, args.join(' ')).toBe('');
      expect(result.stderr, args.join(' ')).toMatch(
        new RegExp(
          `^tailwater: Cannot reach the Tailwater server at ${closed}: ECONNREFUSED.*\\n$`,
        ),
      );
    }
  });
});

describe('`tailwater tail` across a server restart', () => {
  let server: ServerProcess | undefined;
  let dir: string;

  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reconnects with its cursor and prints the whole log exactly once', async () => {
    dir = mkdtempSync(join(tmpdir(), 'tailwater-cli-restart-'));
    const port = await freePort();
    const args = ['--data', dir, '--port', String(port)];
    server = await startServerProcess(args, SERVER_ENV);
    const client = new TailwaterClient({ server: server.url });
    const lines = (from: number, to: number) =>
      Array.from({ length: to - from + 1 }, (_, i) => `line ${from + i}\n`);

    await client.setStatus('cli.restart', 'r1', 'running');
    for (const line of lines(1, 20)) await client.appendLog('cli.restart', 'r1', line);
    const tail = spawnCli(['tail', 'cli.restart', 'r1', '--kinds', 'log', '--server', server.url]);
    try {
      await tail.waitFor((out) => out.includes('line 1\n'));

      // Stop the server (it ends every stream with `end shutdown`), then start it again on the
      // same data and the same port.
      expect(await server.stop('SIGTERM')).toBe(0);
      await tail.waitFor((_out, err) => err.includes('reconnecting'));
      server = await startServerProcess(args, SERVER_ENV);
      expect(server.url).toBe(`http://127.0.0.1:${port}`);

      for (const line of lines(21, 40)) await client.appendLog('cli.restart', 'r1', line);
      await client.setStatus('cli.restart', 'r1', 'success');

      expect(await tail.exited()).toBe(0);
      expect(tail.stdout()).toBe(lines(1, 40).join(''));
      expect(tail.stderr()).toMatch(/the server ended the stream \(shutdown\); reconnecting/);
    } finally {
      if (tail.child.exitCode === null) tail.child.kill('SIGKILL');
    }
  });
});
