import type { Command } from 'commander';
import type { PipelineStats, StorageStats } from '../client/http-client.js';
import { formatBytes } from '../model/format.js';
import type { ClientFlags } from './client-options.js';
import { addClientOptions, clientFrom } from './client-options.js';

interface StatsFlags extends ClientFlags {
  json?: boolean;
}

/** `tailwater stats`: runs and log bytes per pipeline, and in all (docs/CLI.md). */
export function statsCommand(program: Command): void {
  const command = program
    .command('stats')
    .description('Show how many runs, and how many bytes of log, each pipeline keeps.')
    .option('--json', "print the server's JSON answer as it is");
  addClientOptions(command).action(async (flags: StatsFlags) => {
    const stats = await clientFrom(flags).stats();
    if (flags.json) process.stdout.write(`${JSON.stringify(stats)}\n`);
    else process.stdout.write(statsTable(stats.pipelines) + storageLines(stats.storage));
  });
}

/** Where the history is kept: hot, and sealed with what it costs on disk (admin tokens). */
export function storageLines(storage: StorageStats | undefined): string {
  if (!storage) return '';
  const ratio =
    storage.sealedRawBytes > 0
      ? ` (${(storage.sealedBytes / storage.sealedRawBytes).toFixed(3)} ×)`
      : '';
  return (
    `\nHot (not yet sealed): ${formatBytes(storage.hotLogBytes)} of log\n` +
    `Sealed: ${formatBytes(storage.sealedRawBytes)} in ${storage.segments} segments, ` +
    `${formatBytes(storage.sealedBytes)} stored${ratio}\n`
  );
}

export function statsTable(pipelines: readonly PipelineStats[]): string {
  if (pipelines.length === 0) return 'No pipelines yet.\n';
  const rows = pipelines.map((p) => [p.pipeline, String(p.runs), formatBytes(p.logBytes)]);
  const runs = pipelines.reduce((sum, p) => sum + p.runs, 0);
  const bytes = pipelines.reduce((sum, p) => sum + p.logBytes, 0);
  rows.push([`(${pipelines.length} pipelines)`, String(runs), formatBytes(bytes)]);
  const all = [['PIPELINE', 'RUNS', 'LOG'], ...rows];
  const widths = [0, 1, 2].map((i) => Math.max(...all.map((row) => row[i]!.length)));
  return all
    .map(
      ([name, count, size]) =>
        `${name!.padEnd(widths[0]!)}  ${count!.padStart(widths[1]!)}  ${size!.padStart(widths[2]!)}\n`,
    )
    .join('');
}
