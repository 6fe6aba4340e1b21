import { Command, CommanderError } from 'commander';
import { SettingsError } from '../model/settings.js';
import { runCommandLine, UsageError } from './run.js';
import { serveCommand } from './serve.js';

/** Errors a user can act on are printed as one line, never as a stack trace. */
function reportAndExit(error: unknown): never {
  if (error instanceof CommanderError) process.exit(error.exitCode);
  const err = error as NodeJS.ErrnoException;
  if (error instanceof UsageError) {
    process.stderr.write(`tailwater: ${error.message}\n`);
    process.exit(2);
  }
  if (error instanceof SettingsError) {
    process.stderr.write(`tailwater: bad setting: ${error.message}\n`);
    process.exit(2);
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
  runCommandLine(program);
  try {
    await program.parseAsync(argv);
  } catch (error) {
    reportAndExit(error);
  }
}

await main(process.argv);
