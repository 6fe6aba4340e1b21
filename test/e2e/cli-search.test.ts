import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TailwaterClient } from '../../src/client/http-client.js';
import type { SearchHit } from '../../src/model/search-result.js';
import { startServerProcess } from '../helpers/server-process.js';
import { runCli } from '../helpers/cli-process.js';
import type { CliOutcome } from '../helpers/cli-process.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { sleep } from '../helpers/wait.js';

// `tailwater search` against a real `tailwater serve` (dist/, so `npm run build` first), as
// docs/CLI.md and docs/SEARCH.md describe it: grep-like lines, exit 1 when nothing matched,
// exit 2 when the server refuses the search.

/** The server's own indexer runs often, so a write is searchable within moments. */
const SERVER_ENV = { TAILWATER_SEARCH_INDEX_SECONDS: '0.1' };
const SECRET = 'a-cli-search-secret-of-more-than-thirty-two-bytes';

const cli = runCli;

/** Polls the search API until `q` finds `count` hits with nothing left to index (10 s at most). */
async function waitForHits(client: TailwaterClient, q: string, count: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  let last = '';
  for (;;) {
    const page = await client.search(q, { limit: 500 });
    if (page.hits.length === count && page.index.pendingEntries === 0) return;
    last = JSON.stringify({ hits: page.hits.map((hit) => hit.text), index: page.index });
    if (Date.now() > deadline) throw new Error(`the index did not find ${count} × "${q}": ${last}`);
    await sleep(50);
  }
}

const ETL_JOB = [
  'echo "starting nightly load"',
  'echo "loading 3 tables"',
  // Split in the command line, so that the runner's `>> Running [...]` line does not hold it.
  'echo "java.lang.OutOf""MemoryError: Java heap space"',
  'exit 1',
].join('; ');

/**
 * The three OutOfMemoryError lines, newest run first and later lines first within a run. The
 * runner's log starts with its `>> Running [...]` line, so the job's third line is line 4.
 */
const ALL_LINES = [
  'ml.train/r1:4: OutOfMemoryError again after restart',
  'ml.train/r1:3: outofmemoryerror on cuda device 0',
  'etl.nightly/r1:4: java.lang.OutOfMemoryError: Java heap space',
];

const lines = (stdout: string) => stdout.split('\n').filter((line) => line !== '');

describe('tailwater search against a real server', () => {
  let server: ServerProcess;
  let client: TailwaterClient;
  let dir: string;
  let ran: CliOutcome;

  const search = (args: string[]) => cli(['search', ...args, '--server', server.url]);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tailwater-cli-search-'));
    server = await startServerProcess(['--data', dir], SERVER_ENV);
    client = new TailwaterClient({ server: server.url });
    // A job that runs out of memory and fails, run as a user would run it.
    ran = await cli([
      'run',
      '--pipeline',
      'etl.nightly',
      '--run-id',
      'r1',
      '--server',
      server.url,
      '--',
      'bash',
      '-c',
      ETL_JOB,
    ]);
    // A later run written over HTTP, which succeeds despite the text.
    await client.setStatus('ml.train', 'r1', 'running');
    await client.appendLog(
      'ml.train',
      'r1',
      'epoch 1\nepoch 2\noutofmemoryerror on cuda device 0\n',
    );
    await client.appendLog('ml.train', 'r1', 'OutOfMemoryError again after restart\n');
    await client.setStatus('ml.train', 'r1', 'success');
    await waitForHits(client, 'outofmemory', 3);
  });

  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the seeding job exits 1 and its run is failed', async () => {
    expect(ran.code).toBe(1);
    expect((await client.getRun('etl.nightly', 'r1')).status).toBe('failed');
  });

  it('prints every hit as `fqn/run:line: text` with the exact line number, newest run first, and exits 0', async () => {
    const out = await search(['outofmemory']);
    expect(out.stderr).toBe('');
    expect(out.stdout).toBe(`${ALL_LINES.join('\n')}\n`);
    expect(out.code).toBe(0);
  });

  it('--json prints one JSON hit per line', async () => {
    const out = await search(['outofmemory', '--json']);
    expect(out.code).toBe(0);
    const hits = lines(out.stdout).map((line) => JSON.parse(line) as SearchHit);
    expect(hits.map((hit) => `${hit.pipeline}/${hit.runId}:${hit.line}`)).toEqual([
      'ml.train/r1:4',
      'ml.train/r1:3',
      'etl.nightly/r1:4',
    ]);
    expect(hits[2]).toMatchObject({
      pipeline: 'etl.nightly',
      runId: 'r1',
      runStatus: 'failed',
      kind: 'log',
      line: 4,
      offset: Buffer.byteLength(
        `>> Running ['bash', '-c', '${ETL_JOB}']\nstarting nightly load\nloading 3 tables\n`,
      ),
      text: 'java.lang.OutOfMemoryError: Java heap space',
      truncated: false,
      matches: [[10, 21]],
    });
    expect(hits[0]!.runStatus).toBe('success');
  });

  it('--pipeline keeps only the pipelines its glob matches', async () => {
    const etl = await search(['outofmemory', '--pipeline', 'etl.*']);
    expect(etl.stdout).toBe(`${ALL_LINES[2]}\n`);
    expect(etl.code).toBe(0);
    const ml = await search(['outofmemory', '--pipeline', 'ml.train']);
    expect(ml.stdout).toBe(`${ALL_LINES.slice(0, 2).join('\n')}\n`);
  });

  it('--status failed keeps only failed runs', async () => {
    const failed = await search(['outofmemory', '--status', 'failed']);
    expect(failed.stdout).toBe(`${ALL_LINES[2]}\n`);
    expect(failed.code).toBe(0);
    const both = await search(['outofmemory', '--status', 'failed,success']);
    expect(both.stdout).toBe(`${ALL_LINES.join('\n')}\n`);
  });

  it('--since 1h finds the runs started in the last hour; --until 1h finds none and exits 1', async () => {
    const since = await search(['outofmemory', '--since', '1h']);
    expect(since.stdout).toBe(`${ALL_LINES.join('\n')}\n`);
    expect(since.code).toBe(0);
    const until = await search(['outofmemory', '--until', '1h']);
    expect(until.stdout).toBe('');
    expect(until.code).toBe(1);
  });

  it('-E takes the text as a regular expression', async () => {
    const out = await search(['-E', 'out\\w+error on c[a-z]+a']);
    expect(out.stdout).toBe(`${ALL_LINES[1]}\n`);
    expect(out.code).toBe(0);
    // Without -E the same text is taken literally, and nothing holds it.
    const literal = await search(['out\\w+error on c[a-z]+a']);
    expect(literal.stdout).toBe('');
    expect(literal.code).toBe(1);
  });

  it('-m 2 stops after 2 hits', async () => {
    const out = await search(['outofmemory', '-m', '2']);
    expect(out.stdout).toBe(`${ALL_LINES.slice(0, 2).join('\n')}\n`);
    expect(out.code).toBe(0);
  });

  it('exits 1 and prints nothing on stdout when nothing matched', async () => {
    const out = await search(['no-such-phrase-anywhere']);
    expect(out.stdout).toBe('');
    expect(out.code).toBe(1);
  });

  it('a regular expression without a literal is one clear line on stderr and exit 2', async () => {
    const out = await search(['-E', '\\d+']);
    expect(out.stdout).toBe('');
    expect(out.code).toBe(2);
    expect(lines(out.stderr)).toHaveLength(1);
    expect(out.stderr).toMatch(/^tailwater: q: the regular expression must contain a literal/);
    expect(out.stderr).not.toMatch(/\n\s+at /);
  });

  it('a malformed regular expression is one line on stderr naming RE2, and exit 2', async () => {
    const out = await search(['-E', 'OutOf(Memory']);
    expect(out.stdout).toBe('');
    expect(out.code).toBe(2);
    expect(lines(out.stderr)).toHaveLength(1);
    expect(out.stderr).toMatch(/^tailwater: .*RE2/);
  });

  it('a text of 2 characters is refused with exit 2', async () => {
    const out = await search(['oo']);
    expect(out.stdout).toBe('');
    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/^tailwater: .*3 characters/);
  });

  it('an unknown --status is refused before asking the server, with exit 2', async () => {
    const out = await search(['outofmemory', '--status', 'exploded']);
    expect(out.stdout).toBe('');
    expect(out.code).toBe(2);
    expect(out.stderr).toContain('exploded');
  });
});

describe('tailwater search against a real server with authentication', () => {
  let server: ServerProcess;
  let dir: string;
  let tokenFile: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tailwater-cli-search-auth-'));
    server = await startServerProcess(['--data', dir], {
      ...SERVER_ENV,
      TAILWATER_AUTH_SECRET: SECRET,
    });
    const minted = await cli(
      ['token', '--read', 'pipeline:etl.*', '--write', 'pipeline:etl.*', '--ttl', '600'],
      { TAILWATER_AUTH_SECRET: SECRET },
    );
    expect(minted.code).toBe(0);
    const token = minted.stdout.trim();
    tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const client = new TailwaterClient({ server: server.url, token });
    await client.setStatus('etl.secure', 'r1', 'running');
    await client.appendLog('etl.secure', 'r1', 'ok\nOutOfMemoryError in secure job\n');
    await client.setStatus('etl.secure', 'r1', 'failed');
    await waitForHits(client, 'outofmemory', 1);
  });

  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('--token-file sends the token from the file and finds the hit', async () => {
    const out = await cli([
      'search',
      'outofmemory',
      '--server',
      server.url,
      '--token-file',
      tokenFile,
    ]);
    expect(out.stderr).toBe('');
    expect(out.stdout).toBe('etl.secure/r1:2: OutOfMemoryError in secure job\n');
    expect(out.code).toBe(0);
  });

  it('without a token, fails with an error that mentions the token and prints nothing', async () => {
    const out = await cli(['search', 'outofmemory', '--server', server.url]);
    expect(out.stdout).toBe('');
    expect(out.code).not.toBe(0);
    expect(lines(out.stderr)).toHaveLength(1);
    expect(out.stderr).toMatch(/token/i);
  });
});
