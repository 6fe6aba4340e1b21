import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { readAllEntries, runPath as runPathOf } from '../helpers/api.js';
import { freePort } from '../helpers/net.js';
import { BIN, startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { openSse } from '../helpers/sse.js';
import type { SseReader } from '../helpers/sse.js';

// End-to-end tests of `tailwater run` (issue #5): the real binary runs real commands against a
// real `tailwater serve`, and everything is checked through the server's public API.

const PIPELINE = 'runner.e2e';

/**
 * A command printing numbered lines (some with multi-byte text) with random pauses. After the
 * first line it waits (at most 30 s) for the gate file to exist, which the test creates once a
 * viewer has seen that line: so the line was live while the command was still printing.
 */
const NUMBERED_LINES = `
import { existsSync, writeFileSync } from 'node:fs';
const [count, captureFile, gateFile, timingFile, seed] = process.argv.slice(2);
let state = Number(seed) >>> 0;
const random = () => {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const written = [];
let gateOpened = false;
for (let n = 1; n <= Number(count); n += 1) {
  const line = 'line ' + String(n).padStart(5, '0') + ' ' + 'x'.repeat(Math.floor(random() * 60)) +
    (n % 7 === 0 ? ' naïve ✓ — ünïcödé' : '') + '\\n';
  process.stdout.write(line);
  written.push(line);
  if (n === 1) {
    for (let i = 0; i < 3000 && !gateOpened; i += 1) {
      gateOpened = existsSync(gateFile);
      if (!gateOpened) await sleep(10);
    }
  }
  if (random() < 0.01) await sleep(Math.floor(random() * 40));
}
writeFileSync(captureFile, written.join(''));
writeFileSync(timingFile, JSON.stringify({ gateOpened }));
`;

/**
 * A command printing a timestamped line every 20 ms, told by files what the test is doing. Once
 * the `down` file exists it writes a 256 KiB burst, four times the pipe's buffer, so the write
 * completes only if the runner keeps draining its output, and then creates `burst-done`. Once
 * the `up` file exists it prints 50 more lines and exits (after 20,000 lines at most).
 */
const TICKER = `
import { existsSync, writeFileSync } from 'node:fs';
const [captureFile, downFile, burstDoneFile, upFile] = process.argv.slice(2);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const written = [];
const print = (text) =>
  new Promise((resolve) => {
    written.push(text);
    process.stdout.write(text, resolve);
  });
let burst = false;
let afterUp = 0;
for (let n = 1; n <= 20000 && afterUp < 50; n += 1) {
  await print('tick ' + String(n).padStart(5, '0') + ' at ' + Date.now() + '\\n');
  if (!burst && existsSync(downFile)) {
    burst = true;
    const lines = [];
    for (let b = 1; b <= 4096; b += 1) lines.push('burst ' + String(b).padStart(4, '0') + ' ' + 'y'.repeat(52) + '\\n');
    await print(lines.join(''));
    await print('tick ' + String(n).padStart(5, '0') + ' after the burst at ' + Date.now() + '\\n');
    writeFileSync(burstDoneFile, String(Date.now()));
  }
  if (existsSync(upFile)) afterUp += 1;
  await sleep(20);
}
writeFileSync(captureFile, written.join(''));
`;

/**
 * A leader that exits on SIGTERM, with a child that ignores it (and holds the output pipe).
 * Prints `tree <leader pid> <child pid>`, then stays quiet.
 */
const STUBBORN_CHILD = `
import { spawn } from 'node:child_process';
const child = spawn('bash', ['-c', 'trap "" TERM; sleep 60'], { stdio: 'inherit' });
process.stdout.write('tree ' + process.pid + ' ' + child.pid + '\\n');
setInterval(() => {}, 1000);
`;

/** A tree in which every process ignores SIGTERM (the brief's bash example). */
const STUBBORN_TREE_BASH = 'trap "" TERM; (trap "" TERM; sleep 60) & echo "tree $$ $!"; sleep 60';

/** Freight writes the command as a Python list (see runner.ts). */
function header(parts: readonly string[]): string {
  const quoted = parts.map((part) => `'${part.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`);
  return `>> Running [${quoted.join(', ')}]\n`;
}

interface Cli {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const readLogEntries = (base: string, run: string): Promise<Entry[]> =>
  readAllEntries(base, run, 'kinds=log');

async function logText(base: string, run: string): Promise<string> {
  const res = await fetch(`${base}${run}/log.txt`);
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer()).toString('utf8');
}

async function runStatus(base: string, run: string): Promise<string> {
  const res = await fetch(`${base}${run}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { status: string }).status;
}

/** Waits (bounded) until `check` holds; returns whether it did. */
async function until(check: () => boolean, timeoutMs: number, stepMs = 20): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; i < 100_000 && Date.now() < deadline; i += 1) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, stepMs));
  }
  return check();
}

interface ProcStat {
  pid: number;
  state: string;
  pgrp: number;
  command: string;
}

function procStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
  const close = text.lastIndexOf(')');
  const fields = text.slice(close + 2).split(' ');
  return {
    pid,
    state: fields[0]!,
    pgrp: Number(fields[2]),
    command: text.slice(text.indexOf('(') + 1, close),
  };
}

/** Live (not zombie) processes of a process group, found through /proc. */
function liveGroupMembers(pgid: number): ProcStat[] {
  const members: ProcStat[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = procStat(Number(name));
    if (stat && stat.pgrp === pgid && stat.state !== 'Z') members.push(stat);
  }
  return members;
}

/** A pid is gone when it has no /proc entry or is a zombie waiting to be reaped. */
function isGone(pid: number): boolean {
  const stat = procStat(pid);
  return stat === undefined || stat.state === 'Z';
}

describe('tailwater run against a real tailwater serve', () => {
  const servers: ServerProcess[] = [];
  const clis: Cli[] = [];
  const readers: SseReader[] = [];
  /** Process groups of commands the runner started (the leader's pid is the group id). */
  const groups: number[] = [];
  const dirs: string[] = [];

  afterEach(async () => {
    for (const reader of readers.splice(0)) reader.close();
    for (const cli of clis.splice(0)) {
      if (cli.child.exitCode === null && cli.child.signalCode === null) {
        cli.child.kill('SIGKILL');
        await cli.exited;
      }
    }
    // Whatever the runner failed to stop: only the processes still in the groups it started.
    for (const pgid of groups.splice(0)) {
      for (const member of liveGroupMembers(pgid)) {
        try {
          process.kill(member.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    for (const server of servers.splice(0)) await server.stop('SIGKILL');
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  function tempDir(prefix: string): string {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(dir);
    return dir;
  }

  async function startServer(args: string[] = []): Promise<ServerProcess> {
    const server = await startServerProcess(args);
    servers.push(server);
    return server;
  }

  function startCli(args: string[], spoolDir: string): Cli {
    const child = spawn(process.execPath, [BIN, 'run', ...args], {
      env: { ...process.env, TAILWATER_SPOOL_DIR: spoolDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const cli: Cli = { child, stdout: () => stdout, stderr: () => stderr, exited };
    clis.push(cli);
    return cli;
  }

  const runPath = (runId: string) => runPathOf(PIPELINE, runId);

  it('stops for a cancel requested the moment its run exists, before it could be following the run', async () => {
    const server = await startServer(['--data', tempDir('tailwater-runner-data-')]);
    const runId = 'cancel-at-once';
    const cli = startCli(
      ['--pipeline', PIPELINE, '--run-id', runId, '--server', server.url, '--', 'sleep', '30'],
      tempDir('tailwater-runner-spool-'),
    );
    // Cancel as soon as the run answers, as a Cancel button pressed at once would.
    let cancelled: Response | undefined;
    for (let attempt = 0; attempt < 500 && !cancelled; attempt += 1) {
      const res = await fetch(`${server.url}${runPath(runId)}/cancel`, { method: 'POST' });
      if (res.status === 202) cancelled = res;
      else await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(cancelled?.status).toBe(202);
    expect(await cli.exited, cli.stderr()).toEqual({ code: 130, signal: null });
    expect(await logText(server.url, runPath(runId))).toBe(
      `${header(['sleep', '30'])}>> Task was cancelled\n`,
    );
    expect(await runStatus(server.url, runPath(runId))).toBe('cancelled');
  }, 40_000);

  it('the binary has a `run` command', async () => {
    const child = spawn(process.execPath, [BIN, 'run', '--help'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect({ code, out }).toMatchObject({
      code: 0,
      out: expect.stringContaining('Usage: tailwater run'),
    });
  });

  describe('a command printing 10,000 numbered lines with random pauses', () => {
    it('is stored byte for byte in chunks of ≤ 4096 bytes cut at newlines, seen live by a viewer, and ends success with exit 0', async () => {
      const server = await startServer(['--data', tempDir('tailwater-runner-data-')]);
      const work = tempDir('tailwater-runner-work-');
      const spoolDir = join(work, 'spool');
      const script = join(work, 'numbered.mjs');
      writeFileSync(script, NUMBERED_LINES);
      const capture = join(work, 'output.txt');
      const gate = join(work, 'gate');
      const timing = join(work, 'timing.json');
      const run = runPath('lines-10000');

      // The viewer is there before the run exists; the stream waits for it. Once it has seen the
      // first line, it opens the gate that the command waits at before printing the rest.
      const reader = await openSse(`${server.url}${run}/stream?kinds=log`);
      readers.push(reader);
      expect(reader.status).toBe(200);
      const firstOutputSeen = reader
        .waitFor(
          (events) =>
            events.some(
              (e) => e.event === 'log' && (JSON.parse(e.data) as Entry).text?.startsWith('line '),
            ),
          60_000,
        )
        .then(
          () => writeFileSync(gate, ''),
          () => undefined, // asserted below through the command's gateOpened
        );

      const command = [process.execPath, script, '10000', capture, gate, timing, '20261129'];
      const cli = startCli(
        [
          '--pipeline',
          PIPELINE,
          '--run-id',
          'lines-10000',
          '--server',
          server.url,
          '--',
          ...command,
        ],
        spoolDir,
      );
      const { code, signal } = await cli.exited;
      expect({ code, signal }, cli.stderr()).toEqual({ code: 0, signal: null });
      await firstOutputSeen;

      const output = readFileSync(capture, 'utf8');
      const { gateOpened } = JSON.parse(readFileSync(timing, 'utf8')) as { gateOpened: boolean };
      expect(output.split('\n')).toHaveLength(10_001);

      // The log is the header line and then exactly what the command wrote.
      const log = await logText(server.url, run);
      expect(Buffer.from(log).equals(Buffer.from(header(command) + output))).toBe(true);

      const entries = await readLogEntries(server.url, run);
      expect(entries[0]!.text).toBe(header(command));
      expect(entries.map((e) => e.text).join('')).toBe(log);
      let offset = 0;
      entries.forEach((entry, index) => {
        const size = Buffer.byteLength(entry.text!, 'utf8');
        expect(entry.offset).toBe(offset);
        offset += size;
        expect(size).toBeLessThanOrEqual(4096);
        if (index < entries.length - 1) expect(entry.text!.endsWith('\n')).toBe(true);
      });
      // 300-odd KiB in chunks of at most 4 KiB.
      expect(entries.length).toBeGreaterThan(Buffer.byteLength(output) / 4096);

      // Live: the first line reached the viewer while the command was still printing (it printed
      // the rest only once the viewer had seen it).
      expect(gateOpened).toBe(true);
      const firstSeen = reader.events
        .filter((e) => e.event === 'log')
        .map((e) => JSON.parse(e.data) as Entry)
        .find((e) => e.text?.startsWith('line '))!;
      expect(firstSeen.text!.startsWith('line 00001 ')).toBe(true);

      expect(await runStatus(server.url, run)).toBe('success');
      expect(readdirSync(spoolDir)).toEqual([]);
    });

    it('that exits 3 ends the run failed and the CLI exits 3', async () => {
      const server = await startServer(['--data', tempDir('tailwater-runner-data-')]);
      const spoolDir = join(tempDir('tailwater-runner-work-'), 'spool');
      const run = runPath('exit-3');
      const cli = startCli(
        [
          '--pipeline',
          PIPELINE,
          '--run-id',
          'exit-3',
          '--server',
          server.url,
          '--',
          'bash',
          '-c',
          'echo about to fail; exit 3',
        ],
        spoolDir,
      );
      expect(await cli.exited, cli.stderr()).toEqual({ code: 3, signal: null });
      expect(await runStatus(server.url, run)).toBe('failed');
      expect(await logText(server.url, run)).toBe(
        `${header(['bash', '-c', 'echo about to fail; exit 3'])}about to fail\n`,
      );
    });
  });

  type Tree = 'every process ignores SIGTERM' | 'the leader exits on SIGTERM, a child ignores it';
  const trees: Tree[] = [
    'every process ignores SIGTERM',
    'the leader exits on SIGTERM, a child ignores it',
  ];

  function treeCommand(tree: Tree, work: string): string[] {
    if (tree === 'every process ignores SIGTERM') return ['bash', '-c', STUBBORN_TREE_BASH];
    const script = join(work, 'stubborn-child.mjs');
    writeFileSync(script, STUBBORN_CHILD);
    return [process.execPath, script];
  }

  /**
   * The kill grace the tree tests give (`--kill-grace`; 10 s by default, as Freight): every tree
   * here has a process that ignores SIGTERM, so each stop waits it out before SIGKILL.
   */
  const KILL_GRACE_SECONDS = 1;

  /** Starts the CLI on a tree command and waits for its `tree <leader> <child>` line. */
  async function startTree(
    server: ServerProcess,
    runId: string,
    tree: Tree,
    flags: string[],
  ): Promise<{ cli: Cli; command: string[]; pids: number[]; pgid: number; treeLine: string }> {
    const work = tempDir('tailwater-runner-work-');
    const command = treeCommand(tree, work);
    const cli = startCli(
      [
        '--pipeline',
        PIPELINE,
        '--run-id',
        runId,
        '--server',
        server.url,
        '--kill-grace',
        String(KILL_GRACE_SECONDS),
        ...flags,
        '--',
        ...command,
      ],
      join(work, 'spool'),
    );
    expect(await until(() => /tree \d+ \d+\n/.test(cli.stdout()), 10_000), cli.stderr()).toBe(true);
    const match = /tree (\d+) (\d+)\n/.exec(cli.stdout())!;
    const pids = [Number(match[1]), Number(match[2])];
    const pgid = pids[0]!;
    groups.push(pgid);
    // The runner put the command in a group of its own, and both processes are alive in it.
    expect(liveGroupMembers(pgid).map((p) => p.pid)).toEqual(expect.arrayContaining(pids));
    return { cli, command, pids, pgid, treeLine: match[0] };
  }

  /** After the CLI exited: nothing of the tree is alive (a short grace for SIGKILL delivery). */
  async function expectTreeGone(pids: number[], pgid: number): Promise<void> {
    await until(() => pids.every(isGone) && liveGroupMembers(pgid).length === 0, 1000);
    expect(pids.filter((pid) => !isGone(pid))).toEqual([]);
    expect(liveGroupMembers(pgid).map((p) => `${p.pid} ${p.command} ${p.state}`)).toEqual([]);
  }

  describe.each(trees)('a process tree in which %s', (tree) => {
    it('is stopped by --timeout: exit 124, `>> Process exceeded time limit of 2s`, run failed, no process left', async () => {
      const server = await startServer(['--data', tempDir('tailwater-runner-data-')]);
      const runId = `timeout-${trees.indexOf(tree)}`;
      const started = Date.now();
      const { cli, command, pids, pgid, treeLine } = await startTree(server, runId, tree, [
        '--timeout',
        '2',
      ]);
      expect(await cli.exited, cli.stderr()).toEqual({ code: 124, signal: null });
      // Not before the limit and the kill grace that followed the SIGTERM.
      expect(Date.now() - started).toBeGreaterThanOrEqual(2000 + KILL_GRACE_SECONDS * 1000);
      await expectTreeGone(pids, pgid);
      const log = await logText(server.url, runPath(runId));
      expect(log.endsWith('>> Process exceeded time limit of 2s\n')).toBe(true);
      expect(log).toBe(`${header(command)}${treeLine}>> Process exceeded time limit of 2s\n`);
      expect(await runStatus(server.url, runPath(runId))).toBe('failed');
    }, 40_000);

    it('is stopped by --read-timeout: exit 124, `>> Process did not receive updates in 2s`, run failed, no process left', async () => {
      const server = await startServer(['--data', tempDir('tailwater-runner-data-')]);
      const runId = `read-timeout-${trees.indexOf(tree)}`;
      const { cli, command, pids, pgid, treeLine } = await startTree(server, runId, tree, [
        '--read-timeout',
        '2',
      ]);
      expect(await cli.exited, cli.stderr()).toEqual({ code: 124, signal: null });
      await expectTreeGone(pids, pgid);
      const log = await logText(server.url, runPath(runId));
      expect(log.endsWith('>> Process did not receive updates in 2s\n')).toBe(true);
      expect(log).toBe(`${header(command)}${treeLine}>> Process did not receive updates in 2s\n`);
      expect(await runStatus(server.url, runPath(runId))).toBe('failed');
    }, 40_000);

    it('is stopped by a cancel from another terminal: 202, exit 130, `>> Task was cancelled`, run cancelled, no process left', async () => {
      const server = await startServer(['--data', tempDir('tailwater-runner-data-')]);
      const runId = `cancel-${trees.indexOf(tree)}`;
      const { cli, command, pids, pgid, treeLine } = await startTree(server, runId, tree, []);
      // The tree line reached the CLI; give the runner a moment to be following its run.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const res = await fetch(`${server.url}${runPath(runId)}/cancel`, { method: 'POST' });
      expect(res.status).toBe(202);
      expect(((await res.json()) as { cancelRequested: boolean }).cancelRequested).toBe(true);
      expect(await cli.exited, cli.stderr()).toEqual({ code: 130, signal: null });
      await expectTreeGone(pids, pgid);
      const log = await logText(server.url, runPath(runId));
      expect(log).toBe(`${header(command)}${treeLine}>> Task was cancelled\n`);
      expect(await runStatus(server.url, runPath(runId))).toBe('cancelled');
    }, 40_000);
  });

  describe.each(['SIGTERM', 'SIGKILL'] as const)(
    'a server stopped with %s for 5 s during a run and restarted on the same data and port',
    (stopSignal) => {
      it('misses nothing and duplicates nothing: the log equals the output, the run ends success, the spool is empty', async () => {
        const data = tempDir('tailwater-runner-data-');
        const work = tempDir('tailwater-runner-work-');
        const spoolDir = join(work, 'spool');
        const script = join(work, 'ticker.mjs');
        writeFileSync(script, TICKER);
        const capture = join(work, 'output.txt');
        const downFile = join(work, 'down');
        const burstDoneFile = join(work, 'burst-done');
        const upFile = join(work, 'up');
        const port = await freePort();
        let server = await startServer(['--data', data, '--port', String(port)]);
        expect(server.url).toBe(`http://127.0.0.1:${port}`);
        const runId = `restart-${stopSignal}`;
        const run = runPath(runId);

        const command = [process.execPath, script, capture, downFile, burstDoneFile, upFile];
        const cli = startCli(
          ['--pipeline', PIPELINE, '--run-id', runId, '--server', server.url, '--', ...command],
          spoolDir,
        );
        // Stop the server once the run is well under way.
        expect(await until(() => cli.stdout().includes('tick 00075 '), 30_000), cli.stderr()).toBe(
          true,
        );
        const storedBefore = await readLogEntries(server.url, run);
        expect(storedBefore.length).toBeGreaterThan(1);
        await server.stop(stopSignal);
        const downAt = Date.now();
        // While the server is away the command writes four pipes' worth at once: the write
        // completes only if the runner keeps reading (and keeps what it reads on disk).
        writeFileSync(downFile, '');
        expect(await until(() => existsSync(burstDoneFile), 30_000), cli.stderr()).toBe(true);
        // Stay away 5 s in all, so the runner retries more than once.
        await new Promise((resolve) =>
          setTimeout(resolve, Math.max(0, downAt + 5000 - Date.now())),
        );
        const upAt = Date.now();
        server = await startServer(['--data', data, '--port', String(port)]);
        expect(server.url).toBe(`http://127.0.0.1:${port}`);
        expect(cli.child.exitCode).toBeNull(); // the command was still running
        writeFileSync(upFile, '');

        expect(await cli.exited, cli.stderr()).toEqual({ code: 0, signal: null });
        // The runner did find the server gone, and kept the output on disk meanwhile.
        expect(cli.stderr()).toContain('output is kept on disk');
        const output = readFileSync(capture, 'utf8');
        const lines = output.split('\n').slice(0, -1);
        const ticks = lines.filter((line) => line.startsWith('tick '));
        expect(lines.length - ticks.length).toBe(4096);

        // The command kept printing while the server was away: the burst, and ticks stamped
        // during the outage.
        const stamps = ticks.map((line) => Number(/ at (\d+)$/.exec(line)![1]));
        expect(stamps.filter((at) => at > downAt && at < upAt).length).toBeGreaterThan(0);
        expect(Number(readFileSync(burstDoneFile, 'utf8'))).toBeLessThan(upAt);

        const log = await logText(server.url, run);
        expect(Buffer.from(log).equals(Buffer.from(header(command) + output))).toBe(true);
        const logLines = log.split('\n').slice(1, -1);
        expect(new Set(logLines).size).toBe(logLines.length);
        expect(logLines).toEqual(lines);

        const entries = await readLogEntries(server.url, run);
        expect(entries.map((e) => e.text).join('')).toBe(log);
        let offset = 0;
        for (const entry of entries) {
          expect(entry.offset).toBe(offset);
          offset += Buffer.byteLength(entry.text!, 'utf8');
        }
        expect(await runStatus(server.url, run)).toBe('success');
        expect(existsSync(spoolDir)).toBe(true);
        expect(readdirSync(spoolDir)).toEqual([]);
      }, 120_000);
    },
  );
});
