import type { Command } from 'commander';
import { TailwaterClient } from '../client/http-client.js';
import { loadSettings } from '../model/settings.js';
import { runCommand } from '../runner/runner.js';

interface RunFlags {
  pipeline: string;
  runId?: string;
  step?: string;
  timeout?: string;
  readTimeout?: string;
  server?: string;
  token?: string;
}

function seconds(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0) {
    throw new UsageError(`--${name} must be a positive number of seconds (was "${value}").`);
  }
  return parsed;
}

export class UsageError extends Error {
  override name = 'UsageError';
}

/** A run id for when none is given: sortable and readable, e.g. run-20261129T081500-3f9a. */
function newRunId(): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '');
  return `run-${stamp}-${Math.random().toString(16).slice(2, 6)}`;
}

export function runCommandLine(program: Command): void {
  program
    .command('run')
    .description('Run a command and stream its output to Tailwater as a run of a pipeline.')
    .requiredOption('--pipeline <fqn>', 'the pipeline the run belongs to')
    .option('--run-id <id>', 'the run id (default: a new one)')
    .option('--step <name>', 'the step the output is filed under')
    .option('--timeout <seconds>', 'stop the command after this long (default 3600)')
    .option('--read-timeout <seconds>', 'stop it after this long without output (default 300)')
    .option('--server <url>', 'server URL (default $TAILWATER_SERVER or http://127.0.0.1:8585)')
    .option('--token <token>', 'access token (default $TAILWATER_TOKEN)')
    .argument('<command...>', 'the command and its arguments, after --')
    .action(async (commandLine: string[], flags: RunFlags) => {
      const settings = loadSettings({});
      const [command, ...args] = commandLine;
      if (!command) throw new UsageError('Give the command to run after --.');
      const runId = flags.runId ?? newRunId();
      const client = new TailwaterClient({ server: flags.server, token: flags.token });
      process.stderr.write(`tailwater: run ${runId} of ${flags.pipeline} on ${client.server}\n`);
      const exitCode = await runCommand({
        client,
        pipeline: flags.pipeline,
        runId,
        step: flags.step,
        command,
        args,
        timeoutSeconds: seconds('timeout', flags.timeout, settings.runnerTimeoutSeconds),
        readTimeoutSeconds: seconds(
          'read-timeout',
          flags.readTimeout,
          settings.runnerReadTimeoutSeconds,
        ),
        chunkBytes: settings.runnerChunkBytes,
      });
      process.exit(exitCode);
    });
}
