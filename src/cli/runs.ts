import { InvalidArgumentError } from 'commander';
import type { Command } from 'commander';
import { formatBytes } from '../model/format.js';
import { TailwaterClientError } from '../client/errors.js';
import { validateFqn } from '../model/names.js';
import type { PipelineSummary, Run, RunStatus } from '../model/run.js';
import { isRunStatus, RUN_STATUSES } from '../model/run.js';
import type { ClientFlags } from './client-options.js';
import {
  addClientOptions,
  checkArgument,
  clientFrom,
  integerIn,
  UsageError,
} from './client-options.js';

interface RunsFlags extends ClientFlags {
  status?: RunStatus;
  limit?: number;
  json?: boolean;
}

export function runsCommand(program: Command): void {
  const command = program
    .command('runs')
    .description(
      'List pipelines (with their run count and last run), or the runs of one pipeline, newest first.',
    )
    .argument('[fqn]', 'the pipeline whose runs to list')
    .option(`--status <status>`, `only runs with this status (${RUN_STATUSES.join(', ')})`, status)
    .option('--limit <n>', 'at most n runs, 1–1000 (default 50)', integerIn(1, 1000))
    .option('--json', "print the server's JSON answer as it is");
  addClientOptions(command).action(async (fqn: string | undefined, flags: RunsFlags) => {
    const client = clientFrom(flags);
    if (fqn === undefined) {
      if (flags.status !== undefined || flags.limit !== undefined) {
        throw new UsageError(
          '--status and --limit apply to the runs of one pipeline: give its fqn.',
        );
      }
      const pipelines = await client.listPipelines();
      if (flags.json) process.stdout.write(`${JSON.stringify({ pipelines })}\n`);
      else process.stdout.write(pipelineTable(pipelines));
      return;
    }
    checkArgument('fqn', () => validateFqn(fqn));
    let runs: Run[];
    try {
      runs = await client.listRuns(fqn, { status: flags.status, limit: flags.limit });
    } catch (error) {
      // An unknown pipeline simply has no runs.
      if (!(error instanceof TailwaterClientError && error.status === 404)) throw error;
      runs = [];
    }
    if (flags.json) process.stdout.write(`${JSON.stringify({ runs })}\n`);
    else process.stdout.write(runTable(fqn, runs, Date.now()));
  });
}

function status(value: string): RunStatus {
  if (!isRunStatus(value)) {
    throw new InvalidArgumentError(`expected one of ${RUN_STATUSES.join(', ')}.`);
  }
  return value;
}

export function pipelineTable(pipelines: readonly PipelineSummary[]): string {
  if (pipelines.length === 0) return 'No pipelines yet.\n';
  return table(
    ['PIPELINE', 'RUNS', 'LAST RUN', 'STATUS', 'STARTED'],
    pipelines.map((p) => [
      p.fqn,
      String(p.runs),
      p.lastRun?.runId ?? '-',
      p.lastRun?.status ?? '-',
      formatTime(p.lastRun?.startedAt ?? p.lastRun?.createdAt ?? null),
    ]),
    [false, true, false, false, false],
  );
}

export function runTable(fqn: string, runs: readonly Run[], now: number): string {
  if (runs.length === 0) return `No runs of ${fqn}.\n`;
  return table(
    ['RUN ID', 'STATUS', 'STARTED', 'DURATION', 'LOG'],
    runs.map((run) => [
      run.runId,
      run.cancelRequested && run.endedAt === null ? `${run.status} (cancelling)` : run.status,
      formatTime(run.startedAt ?? run.createdAt),
      formatDuration(run, now),
      formatBytes(run.logBytes),
    ]),
    [false, false, false, true, true],
  );
}

/** Columns padded to their widest cell; `right[i]` aligns column i to the right. */
function table(header: string[], rows: string[][], right: boolean[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((row) => row[i]!.length)));
  return all
    .map(
      (row) =>
        row
          .map((cell, i) => (right[i] ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
          .join('  ')
          .trimEnd() + '\n',
    )
    .join('');
}

/** `2026-11-29 08:00:00Z` */
function formatTime(iso: string | null): string {
  if (!iso) return '-';
  return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

/** Time from start to end, or to now (`+` marks a run still going). */
function formatDuration(run: Run, now: number): string {
  if (!run.startedAt) return '-';
  const start = Date.parse(run.startedAt);
  const end = run.endedAt ? Date.parse(run.endedAt) : now;
  const text = formatSeconds(Math.max(0, Math.round((end - start) / 1000)));
  return run.endedAt ? text : `${text}+`;
}

function formatSeconds(total: number): string {
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h${String(m).padStart(2, '0')}m${String(s).padStart(2, '0')}s`;
  if (m > 0) return `${m}m${String(s).padStart(2, '0')}s`;
  return `${s}s`;
}
