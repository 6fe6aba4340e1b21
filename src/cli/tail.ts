import { Option } from 'commander';
import type { Command } from 'commander';
import { TailwaterClientError } from '../client/errors.js';
import { tail } from '../client/tail.js';
import type { EndFrame, GapFrame } from '../client/tail.js';
import type { Entry } from '../model/entry.js';
import { validateFqn, validateRunId } from '../model/names.js';
import type { ClientFlags } from './client-options.js';
import {
  addClientOptions,
  checkArgument,
  clientFrom,
  integerIn,
  kindList,
} from './client-options.js';

interface TailFlags extends ClientFlags {
  follow?: boolean;
  fromStart?: boolean;
  tail?: number;
  lines?: number;
  kinds?: string[];
  json?: boolean;
}

/** Consecutive failed connections before giving up: rides out a restart of several seconds. */
export const TAIL_MAX_RETRIES = 8;

/** Exit status of `tail` stopped by Ctrl-C (128 + SIGINT). */
const EXIT_INTERRUPTED = 130;

export function tailCommand(program: Command): void {
  const command = program
    .command('tail')
    .description(
      'Follow a run: print its log as it arrives (other entries as one line each) until it ' +
        'ends; exit 0 if it succeeded, 1 otherwise.',
    )
    .argument('<fqn>', 'the pipeline')
    .argument('[runId]', 'the run, or latest (the newest run)', 'latest')
    .option('--follow', 'follow until the run ends (always the case; accepted for compatibility)')
    .addOption(
      new Option('--from-start', "start from the run's first entry (the default)").conflicts([
        'tail',
        'lines',
      ]),
    )
    .addOption(
      new Option('--tail <n>', 'start with the last n entries')
        .argParser(integerIn(0, 1_000_000))
        .conflicts('lines'),
    )
    .addOption(
      new Option(
        '--lines <n>',
        'start with the last n lines of the log (as tail -n counts them), then what follows',
      )
        .argParser(integerIn(0, 1_000_000))
        .conflicts('json'),
    )
    .option('--kinds <kinds>', 'only these kinds, comma-separated (e.g. log,progress)', kindList)
    .option('--json', 'print every entry as one line of JSON');
  addClientOptions(command).action(async (fqn: string, runIdArg: string, flags: TailFlags) => {
    process.exitCode = await runTail(fqn, runIdArg, flags);
  });
}

async function runTail(fqn: string, runIdArg: string, flags: TailFlags): Promise<number> {
  checkArgument('fqn', () => validateFqn(fqn));
  if (runIdArg !== 'latest') checkArgument('runId', () => validateRunId(runIdArg));
  const client = clientFrom(flags);
  const controller = new AbortController();
  process.once('SIGINT', () => {
    controller.abort();
    process.exit(EXIT_INTERRUPTED);
  });

  // A concrete run id first, so a reconnect follows this run even if a newer one starts. This
  // also tells an unreachable server at once rather than after the reconnect attempts.
  let runId = runIdArg;
  let started = true;
  try {
    runId = (await client.getRun(fqn, runIdArg)).runId;
  } catch (error) {
    const notYet = error instanceof TailwaterClientError && error.status === 404;
    if (!notYet || runIdArg === 'latest') throw error;
    started = false;
    notice(`run ${runId} of ${fqn} does not exist yet; waiting for it to start`);
  }

  const printer = new EntryPrinter(flags.json === true);
  // The last lines as text, then the stream from where they end (docs/API.md, "Reading without
  // streaming"). A run that has not started has no log yet: it is followed from its start.
  let after: string | undefined;
  if (flags.lines !== undefined && started) {
    const last = await client.lastLogLines(fqn, runId, flags.lines);
    if (flags.kinds === undefined || flags.kinds.includes('log')) printer.text(last.text);
    after = last.cursor;
  }
  let end: EndFrame | undefined;
  for await (const event of tail({
    server: client.server,
    token: client.token,
    target: { pipeline: fqn, runId },
    after,
    tail: flags.tail,
    kinds: flags.kinds,
    maxRetries: TAIL_MAX_RETRIES,
    signal: controller.signal,
  })) {
    if (event.type === 'entry') printer.entry(event.entry, event.json);
    else if (event.type === 'gap') notice(describeGap(event.gap));
    else if (event.type === 'reconnecting') {
      // A bare error code (ECONNREFUSED…) is a connection that could not be made.
      const reason = /^[A-Z_]+$/.test(event.reason)
        ? `cannot reach the server (${event.reason})`
        : event.reason;
      notice(
        `${reason}; reconnecting in ${(event.delayMs / 1000).toFixed(1)} s ` +
          `(attempt ${event.attempt} of ${TAIL_MAX_RETRIES})`,
      );
    } else if (event.type === 'end') end = event.end;
  }
  if (!end) return EXIT_INTERRUPTED;
  printer.finish();

  if (end.reason === 'runDeleted') {
    notice(`run ${runId} of ${fqn} was deleted`);
    return 1;
  }
  let status = end.status;
  if (status === undefined) {
    try {
      status = (await client.getRun(fqn, runId)).status;
    } catch (error) {
      if (!(error instanceof TailwaterClientError && error.status === 404)) throw error;
      notice(`the stream ended (${end.reason}) and run ${runId} of ${fqn} never started`);
      return 1;
    }
  }
  if (status === 'success') return 0;
  notice(
    end.reason === 'runFinished'
      ? `run ${runId} of ${fqn} finished: ${status}`
      : `the stream ended (${end.reason}); run ${runId} of ${fqn} is ${status}`,
  );
  return 1;
}

/** Writes entries to stdout: log text exactly as written, anything else as one line. */
class EntryPrinter {
  private atLineStart = true;

  constructor(private readonly json: boolean) {}

  /** `json` is the entry as the server sent it: printed as is, its numbers stay exact. */
  entry(entry: Entry, json: string): void {
    if (this.json) {
      process.stdout.write(`${json}\n`);
    } else if (entry.kind === 'log') {
      this.text(entry.text ?? '');
    } else {
      // Log text that stopped mid-line gets a line break so the event stays on its own line.
      this.write(`${compactLine(entry)}\n`);
    }
  }

  /** Log text, exactly as written. */
  text(text: string): void {
    if (text.length === 0) return;
    process.stdout.write(text);
    this.atLineStart = text.endsWith('\n');
  }

  /** Ends a last log line that had no newline, so the shell prompt starts on its own line. */
  finish(): void {
    if (!this.atLineStart && process.stdout.isTTY) this.write('');
  }

  private write(line: string): void {
    process.stdout.write(this.atLineStart ? line : `\n${line}`);
    this.atLineStart = true;
  }
}

/** `[progress step=train] {"pct":50}` */
export function compactLine(entry: Entry): string {
  const labels = [entry.kind];
  if (entry.step !== undefined) labels.push(`step=${entry.step}`);
  if (entry.correlationId !== undefined) labels.push(`correlationId=${entry.correlationId}`);
  return `[${labels.join(' ')}] ${JSON.stringify(entry.data ?? null)}`;
}

function describeGap(gap: GapFrame): string {
  if (gap.reason === 'retention') {
    return `entries ${gap.fromSeq}–${gap.toSeq} were deleted by retention and cannot be shown`;
  }
  return 'the stream was reset (the server lost what this viewer had seen); showing it again from its start';
}

function notice(message: string): void {
  process.stderr.write(`tailwater: ${message}\n`);
}
