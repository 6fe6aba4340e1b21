import { Command, CommanderError } from 'commander';
import { TailwaterClientError } from '../client/errors.js';
import { SettingsError } from '../model/settings.js';
import { UsageError } from './client-options.js';
import { publishCommand } from './publish.js';
import { runsCommand } from './runs.js';
import { serveCommand } from './serve.js';
import { tailCommand } from './tail.js';

/** Commander's own outcomes that are not a misuse: help and version output. */
const NOT_USAGE_ERRORS = new Set(['commander.helpDisplayed', 'commander.help', 'commander.version']);

/** Errors a user can act on are printed as one line, never as a stack trace. */
function reportAndExit(error: unknown): never {
  if (error instanceof CommanderError) {
    // Commander has printed its message; a bad command line exits 2.
    process.exit(NOT_USAGE_ERRORS.has(error.code) ? error.exitCode : 2);
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

export async function main(argv: string[]): Promise<void> {
  const program = new Command()
    .name('tailwater')
    .description('Live, durable log and event streaming for pipeline runs.')
    .exitOverride();
  serveCommand(program);
  tailCommand(program);
  publishCommand(program);
  runsCommand(program);
  try {
    await program.parseAsync(argv);
  } catch (error) {
    reportAndExit(error);
  }
}

await main(process.argv);
