import { InvalidArgumentError, Option } from 'commander';
import type { Command } from 'commander';
import type { RunStatus } from '../model/run.js';
import { isRunStatus, RUN_STATUSES } from '../model/run.js';
import type { SearchHit } from '../model/search-result.js';
import type { ClientFlags } from './client-options.js';
import { addClientOptions, clientFrom, integerIn } from './client-options.js';

interface SearchFlags extends ClientFlags {
  pipeline?: string;
  status?: RunStatus[];
  since?: string;
  until?: string;
  kind?: 'log' | 'event' | 'all';
  regex?: boolean;
  maxCount: number;
  json?: boolean;
  color?: boolean;
}

/** Hits asked for per request: the server's largest page. */
const PAGE = 500;

/**
 * `tailwater search <text>`: every run's lines that hold the text, newest runs first, as grep
 * prints them (`fqn/run:line: text`); exit 1 when nothing matched, as grep does
 * (docs/CLI.md).
 */
export function searchCommand(program: Command): void {
  const command = program
    .command('search')
    .description(
      'Find the log lines (and events) of every run that hold the text, newest runs first, as grep prints them; exits 1 when nothing matched.',
    )
    .argument('<text>', 'the text to find (case-insensitive; 3 characters at least)')
    .option('--pipeline <glob>', 'only pipelines this glob matches (`*` any characters)')
    .option(
      '--status <statuses>',
      `only runs with these statuses, comma-separated (${RUN_STATUSES.join(', ')})`,
      statuses,
    )
    .option('--since <time>', 'only runs started since: ISO-8601, or a span back (30m, 24h, 7d)')
    .option('--until <time>', 'only runs started before this')
    .addOption(
      new Option('--kind <kind>', 'log lines, events, or both').choices(['log', 'event', 'all']),
    )
    .option('-E, --regex', 'the text is a regular expression (RE2 syntax)')
    .option(
      '-m, --max-count <n>',
      'stop after n hits, 1–100000 (default 1000)',
      integerIn(1, 100_000),
      1000,
    )
    .option('--json', 'print each hit as one JSON object per line')
    .option('--no-color', 'never highlight the matches (default: highlight on a terminal)');
  addClientOptions(command).action(async (text: string, flags: SearchFlags) => {
    const client = clientFrom(flags);
    const color =
      flags.color !== false && process.stdout.isTTY === true && !process.env['NO_COLOR'];
    let found = 0;
    let cursor: string | undefined;
    do {
      const page = await client.search(text, {
        regex: flags.regex,
        pipeline: flags.pipeline,
        status: flags.status,
        since: flags.since,
        until: flags.until,
        kind: flags.kind,
        limit: Math.min(PAGE, flags.maxCount - found),
        cursor,
      });
      for (const hit of page.hits) {
        process.stdout.write(flags.json ? `${JSON.stringify(hit)}\n` : grepLine(hit, color));
      }
      found += page.hits.length;
      cursor = page.next;
      if (found === 0 && cursor === undefined && page.index.pendingEntries > 0) {
        process.stderr.write(
          `tailwater: the index is ${page.index.lagSeconds} s behind (${page.index.pendingEntries} entries not yet searchable).\n`,
        );
      }
    } while (cursor !== undefined && found < flags.maxCount);
    process.exitCode = found > 0 ? 0 : 1;
  });
}

/** `fqn/run:line: text`, or `fqn/run@seq: data` for an event; matches in bold red on a tty. */
export function grepLine(hit: SearchHit, color: boolean): string {
  const where =
    hit.line === null
      ? `${hit.pipeline}/${hit.runId}@${hit.seq}`
      : `${hit.pipeline}/${hit.runId}:${hit.line}`;
  return `${where}: ${color ? highlight(hit) : hit.text}\n`;
}

function highlight(hit: SearchHit): string {
  let out = '';
  let at = 0;
  for (const [start, end] of hit.matches) {
    out += `${hit.text.slice(at, start)}\u001b[1;31m${hit.text.slice(start, end)}\u001b[0m`;
    at = end;
  }
  return out + hit.text.slice(at);
}

function statuses(value: string): RunStatus[] {
  const list = value.split(',').map((status) => status.trim());
  const bad = list.find((status) => !isRunStatus(status));
  if (bad !== undefined) {
    throw new InvalidArgumentError(`"${bad}" is not one of ${RUN_STATUSES.join(', ')}.`);
  }
  return list as RunStatus[];
}
