import { Command, CommanderError } from 'commander';
import { TailwaterClientError } from '../client/errors.js';
import { SettingsError } from '../model/settings.js';
import { UsageError } from './client-options.js';
import { migrateCommand } from './migrate.js';
import { publishCommand } from './publish.js';
import { runCommandLine } from './run.js';
import { runsCommand } from './runs.js';
import { searchCommand } from './search.js';
import { statsCommand } from './stats.js';
import { serveCommand } from './serve.js';
import { tailCommand } from './tail.js';
import { tokenCommand } from './token.js';

/** Errors a user can act on are printed as one line, never as a stack trace. */
function reportAndExit(error: unknown): never {
  if (error instanceof CommanderError) {
    // Commander has printed its message (or the help asked for, exit 0); a bad command line,
    // including none at all, exits 2.
    process.exit(error.exitCode === 0 ? 0 : 2);
  }
  const err = error as NodeJS.ErrnoException;
  if (error instanceof SettingsError) {
    process.stderr.write(`tailwater: bad setting: ${error.message}\n`);
    process.exit(2);
  }
  if (error instanceof UsageError) {
    process.stderr.write(`tailwater: ${error.message}\n`);
    process.exit(2);
  }
  if (error instanceof TailwaterClientError) {
    // The server refused what the arguments asked for (a bad name, kind or filter): exit 2.
    const badRequest = error.status === 400 || error.status === 413 || error.status === 415;
    const hint =
      error.status === 0 && error.message.startsWith('Cannot reach')
        ? ' (is it running? Set --server or TAILWATER_SERVER.)'
        : '';
    process.stderr.write(`tailwater: ${error.message}${hint}\n`);
    process.exit(badRequest ? 2 : 1);
  }
  if (err.code === 'EADDRINUSE') {
    process.stderr.write(`tailwater: the address is already in use (${err.message})\n`);
    process.exit(1);
  }
  process.stderr.write(`tailwater: ${err.message ?? String(error)}\n`);
  process.exit(1);
}

/** Exit status of a command whose reader went away (`tailwater tail … | head`): 128 + SIGPIPE. */
const EXIT_BROKEN_PIPE = 141;

export async function main(argv: string[]): Promise<void> {
  // Output piped into a reader that stops early: stop quietly, as a shell tool does.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(EXIT_BROKEN_PIPE);
    reportAndExit(error);
  });
  const program = new Command()
    .name('tailwater')
    .description('Live, durable log and event streaming for pipeline runs.')
    .exitOverride();
  serveCommand(program);
  tokenCommand(program);
  runCommandLine(program);
  tailCommand(program);
  publishCommand(program);
  runsCommand(program);
  searchCommand(program);
  statsCommand(program);
  migrateCommand(program);
  try {
    await program.parseAsync(argv);
  } catch (error) {
    reportAndExit(error);
  }
}

await main(process.argv);
