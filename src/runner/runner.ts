import { randomUUID } from 'node:crypto';
import { constants } from 'node:os';
import type { TailwaterClient } from '../client/http-client.js';
import { tail } from '../client/tail.js';
import type { RunStatus } from '../model/run.js';
import { OutputChunker } from './chunker.js';
import { spawnGroup, stopGroup } from './process-tree.js';
import { Spool } from './spool.js';

export interface RunCommandOptions {
  client: TailwaterClient;
  pipeline: string;
  runId: string;
  /** The step every chunk of output is filed under. */
  step?: string | undefined;
  command: string;
  args: readonly string[];
  timeoutSeconds: number;
  readTimeoutSeconds: number;
  /** Freight's 4096-byte chunks. */
  chunkBytes?: number;
  /** How long quiet output may wait before it is sent (default 250 ms). */
  flushMs?: number;
  /** How long a line without its newline may wait (Freight's 3 s). */
  maxWaitMs?: number;
  /** Terminate, then kill the process tree after this long (Freight's 10 s). */
  killGraceMs?: number;
  spoolDir?: string;
  /** Where the command's output is echoed (default: this process's stdout). */
  echo?: (text: string) => void;
  /** Where the runner's own notices go (default: stderr). */
  notice?: (text: string) => void;
}

export const EXIT_TIMEOUT = 124;
export const EXIT_CANCELLED = 130;

type StopReason = 'timeout' | 'readTimeout' | 'cancel';

/** Freight writes the command as a Python list: `>> Running ['bash', '-c', 'echo hi']`. */
function pythonList(parts: readonly string[]): string {
  return `[${parts.map((part) => `'${part.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`).join(', ')}]`;
}

/**
 * Runs a command and streams its merged stdout and stderr to the server as the run's log
 * (Freight's runner): the run goes `running` → `success` / `failed` / `cancelled`, timeouts and a
 * cancel from the server stop the whole process tree with an explanatory line, and output is
 * spooled to disk so that a server that is down mid-run loses nothing. Resolves with the exit
 * code: the command's, 124 after a timeout, 130 after a cancel.
 */
export async function runCommand(options: RunCommandOptions): Promise<number> {
  const echo = options.echo ?? ((text: string) => void process.stdout.write(text));
  const notice = options.notice ?? ((text: string) => void process.stderr.write(`${text}\n`));
  const runner = randomUUID();
  const spool = new Spool(
    options.client,
    options.pipeline,
    options.runId,
    runner,
    options.spoolDir,
    notice,
  );
  let chunkIndex = 0;
  const sendLog = (text: string) =>
    spool.push({ type: 'log', id: `${runner}-${chunkIndex++}`, text, step: options.step });

  spool.push({ type: 'status', status: 'running' });
  const header = `>> Running ${pythonList([options.command, ...options.args])}\n`;
  echo(header);
  sendLog(header);

  const chunker = new OutputChunker(
    options.chunkBytes ?? 4096,
    options.flushMs ?? 250,
    options.maxWaitMs ?? 3000,
  );
  const startedAt = Date.now();
  let lastOutputAt = startedAt;
  let stopReason: StopReason | undefined;
  let cancelRequested = false;

  const child = spawnGroup(options.command, options.args);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const spawnFailed = new Promise<Error>((resolve) => child.once('error', resolve));
  const onOutput = (data: Buffer) => {
    lastOutputAt = Date.now();
    echo(data.toString('utf8'));
    for (const chunk of chunker.push(data, lastOutputAt)) sendLog(chunk);
  };
  child.stdout?.on('data', onOutput);
  child.stderr?.on('data', onOutput);
  const outputClosed = Promise.all(
    [child.stdout, child.stderr].map(
      (stream) =>
        new Promise<void>((resolve) => (stream ? stream.once('close', resolve) : resolve())),
    ),
  );

  // A cancel from the server arrives as a `status` entry on the run's own stream.
  const watching = new AbortController();
  void watchForCancel(options, watching.signal, () => (cancelRequested = true));

  let stopping: Promise<void> | undefined;
  const stop = (reason: StopReason, line: string) => {
    stopReason = reason;
    const pending = chunker.rest();
    if (pending) sendLog(pending);
    echo(line);
    sendLog(line);
    stopping = stopGroup(child, options.killGraceMs ?? 10_000);
  };

  // Freight checks every 0.1 s: flush what is due, then the timeouts and the cancel.
  const ticker = setInterval(() => {
    const now = Date.now();
    const due = chunker.due(now);
    if (due) sendLog(due);
    if (stopReason) return;
    if (cancelRequested) {
      stop('cancel', '>> Task was cancelled\n');
    } else if (now - startedAt > options.timeoutSeconds * 1000) {
      stop('timeout', `>> Process exceeded time limit of ${options.timeoutSeconds}s\n`);
    } else if (now - lastOutputAt > options.readTimeoutSeconds * 1000) {
      stop('readTimeout', `>> Process did not receive updates in ${options.readTimeoutSeconds}s\n`);
    }
  }, 100);

  const outcome = await Promise.race([exited, spawnFailed]);
  let exitCode: number;
  let status: RunStatus;
  if (outcome instanceof Error) {
    const line = `>> Could not start ${options.command}: ${outcome.message}\n`;
    echo(line);
    sendLog(line);
    exitCode = 127;
    status = 'failed';
  } else {
    // Output may still be in the pipes (or held by children) after the leader exits.
    await Promise.race([outputClosed, new Promise((resolve) => setTimeout(resolve, 1000))]);
    exitCode =
      stopReason === 'cancel'
        ? EXIT_CANCELLED
        : stopReason === 'timeout' || stopReason === 'readTimeout'
          ? EXIT_TIMEOUT
          : (outcome.code ?? 128 + (constants.signals[outcome.signal!] ?? 0));
    status = stopReason === 'cancel' ? 'cancelled' : exitCode === 0 ? 'success' : 'failed';
  }
  // A stopped tree is waited for whole: a child that ignored SIGTERM is killed before we leave.
  await stopping;
  clearInterval(ticker);
  watching.abort();
  const rest = chunker.rest();
  if (rest) sendLog(rest);
  spool.push({ type: 'status', status });
  await spool.drained();
  spool.discard();
  return exitCode;
}

async function watchForCancel(
  options: RunCommandOptions,
  signal: AbortSignal,
  onCancel: () => void,
): Promise<void> {
  let after: number | undefined;
  while (!signal.aborted) {
    try {
      for await (const event of tail({
        server: options.client.server,
        token: options.client.token,
        target: { pipeline: options.pipeline, runId: options.runId },
        kinds: ['status'],
        // The run's latest status entry first: a cancel requested before this watch began
        // (while the command was starting) is in it, and is not missed.
        ...(after === undefined ? { tail: 1 } : { after }),
        maxRetries: Number.MAX_SAFE_INTEGER,
        backoff: { initialMs: 200, maxMs: 2000 },
        signal,
      })) {
        if (event.type === 'entry') {
          after = event.entry.seq;
          if ((event.entry.data as { cancelRequested?: boolean }).cancelRequested) onCancel();
        }
        if (event.type === 'end') break;
      }
    } catch {
      // keep watching: the server may come back
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}
