import type { Command } from 'commander';
import { loadSettings } from '../model/settings.js';
import { runCommand } from '../runner/runner.js';
import type { ClientFlags } from './client-options.js';
import { addClientOptions, clientFrom, UsageError } from './client-options.js';

interface RunFlags extends ClientFlags {
  pipeline: string;
  runId?: string;
  step?: string;
  timeout?: string;
  readTimeout?: string;
  killGrace?: string;
}

function seconds(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0) {
    throw new UsageError(`--${name} must be a positive number of seconds (was "${value}").`);
  }
  return parsed;
}

/** A run id for when none is given: sortable and readable, e.g. run-20261129T081500-3f9a. */
function newRunId(): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '');
  return `run-${stamp}-${Math.random().toString(16).slice(2, 6)}`;
}

export function runCommandLine(program: Command): void {
  const command = program
    .command('run')
    .description('Run a command and stream its output to Tailwater as a run of a pipeline.')
    .requiredOption('--pipeline <fqn>', 'the pipeline the run belongs to')
    .option('--run-id <id>', 'the run id (default: a new one)')
    .option('--step <name>', 'the step the output is filed under')
    .option('--timeout <seconds>', 'stop the command after this long (default 3600)')
    .option('--read-timeout <seconds>', 'stop it after this long without output (default 300)')
    .option(
      '--kill-grace <seconds>',
      'when stopping it, how long its processes have after SIGTERM before SIGKILL (default 10)',
    )
    .argument('<command...>', 'the command and its arguments, after --');
  addClientOptions(command).action(async (commandLine: string[], flags: RunFlags) => {
    const settings = loadSettings({});
    const [command, ...args] = commandLine;
    if (!command) throw new UsageError('Give the command to run after --.');
    const runId = flags.runId ?? newRunId();
    const timeoutSeconds = seconds('timeout', flags.timeout, settings.runnerTimeoutSeconds);
    const readTimeoutSeconds = seconds(
      'read-timeout',
      flags.readTimeout,
      settings.runnerReadTimeoutSeconds,
    );
    const killGraceSeconds = seconds(
      'kill-grace',
      flags.killGrace,
      settings.runnerKillGraceSeconds,
    );
    const client = clientFrom(flags);
    process.stderr.write(`tailwater: run ${runId} of ${flags.pipeline} on ${client.server}\n`);
    const exitCode = await runCommand({
      client,
      pipeline: flags.pipeline,
      runId,
      step: flags.step,
      command,
      args,
      timeoutSeconds,
      readTimeoutSeconds,
      killGraceMs: killGraceSeconds * 1000,
      chunkBytes: settings.runnerChunkBytes,
    });
    process.exit(exitCode);
  });
}
