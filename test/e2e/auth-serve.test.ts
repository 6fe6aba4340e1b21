import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServerProcess } from '../helpers/server-process.js';
import { runCli } from '../helpers/cli-process.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { openSse, hasSeq } from '../helpers/sse.js';
import type { SseReader } from '../helpers/sse.js';

// Authentication against a real `tailwater serve` (dist/, so `npm run build` first), with
// tokens minted by `tailwater token` from the same secret (docs/SECURITY.md, docs/CLI.md).

const SECRET = 'an-e2e-secret-of-more-than-thirty-two-bytes!';
const servers: ServerProcess[] = [];
const readers: SseReader[] = [];
afterEach(async () => {
  for (const reader of readers.splice(0)) reader.close();
  for (const server of servers.splice(0)) await server.stop();
});

const cli = runCli;

async function serve(): Promise<ServerProcess> {
  // A data directory of its own, not the working directory's tailwater-data.
  const data = mkdtempSync(join(tmpdir(), 'tailwater-auth-serve-'));
  const server = await startServerProcess(['--log-level', 'info', '--data', data], {
    TAILWATER_AUTH_SECRET: SECRET,
  });
  servers.push(server);
  return server;
}

describe('a real server with authentication', () => {
  it('takes the tokens tailwater token mints: publish and read with one, refused without', async () => {
    const server = await serve();
    const minted = await cli(
      ['token', '--read', 'pipeline:etl.*', '--write', 'pipeline:etl.*', '--ttl', '600'],
      { TAILWATER_AUTH_SECRET: SECRET },
    );
    expect(minted.code).toBe(0);
    const token = minted.stdout.trim();
    expect(token.split('.')).toHaveLength(3);

    const env = { TAILWATER_SERVER: server.url };
    const refused = await cli(['publish', 'etl.daily', 'r1', '--kind', 'k', '{"n":1}'], env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/token/i);
    const published = await cli(['publish', 'etl.daily', 'r1', '--kind', 'k', '{"n":1}'], {
      ...env,
      TAILWATER_TOKEN: token,
    });
    expect(published.stderr).toBe('');
    expect(published.code).toBe(0);
    // The same token from a file, as a job's secret mount gives it.
    const dir = mkdtempSync(join(tmpdir(), 'tailwater-token-'));
    writeFileSync(join(dir, 'token'), `${token}\n`, { mode: 0o600 });
    const fromFile = await cli(
      ['publish', 'etl.daily', 'r1', '--kind', 'k', '{"n":2}', '--token-file', join(dir, 'token')],
      env,
    );
    expect(fromFile.stderr).toBe('');
    expect(fromFile.code).toBe(0);
    const missingFile = await cli(
      ['publish', 'etl.daily', 'r1', '--kind', 'k', '{"n":3}', '--token-file', join(dir, 'nope')],
      env,
    );
    expect(missingFile.code).toBe(2);
    expect(missingFile.stderr).toMatch(/--token-file: cannot read/);
    const outside = await cli(['publish', 'ml.train', 'r1', '--kind', 'k', '{"n":1}'], {
      ...env,
      TAILWATER_TOKEN: token,
    });
    expect(outside.code).not.toBe(0);

    const reader = await openSse(
      `${server.url}/api/v1/pipelines/etl.daily/runs/r1/stream?access_token=${token}`,
    );
    readers.push(reader);
    await reader.waitFor(hasSeq(3));
  });

  it('writes no token into its log, whatever the request made of it', async () => {
    const server = await serve();
    const token = (
      await cli(['token', '--read', 'pipeline:etl.*', '--ttl', '600'], {
        TAILWATER_AUTH_SECRET: SECRET,
      })
    ).stdout.trim();
    const forged = `${token.slice(0, -4)}AAAA`;
    for (const value of [token, forged]) {
      // Allowed, refused (403), refused (401), a route that does not exist, a bad query.
      await fetch(`${server.url}/api/v1/pipelines/etl.daily/runs/r1?access_token=${value}`);
      await fetch(`${server.url}/api/v1/pipelines/ml.train/runs/r1?access_token=${value}`);
      await fetch(`${server.url}/api/v1/nothing/here?access_token=${value}`);
      await fetch(
        `${server.url}/api/v1/pipelines/etl.daily/runs/r1/entries?limit=x&access_token=${value}`,
      );
      await fetch(`${server.url}/api/v1/pipelines/etl.daily/runs/r1`, {
        headers: { authorization: `Bearer ${value}`, cookie: `tailwater_token=${value}` },
      });
    }
    const signature = token.split('.')[2]!;
    expect(server.output()).not.toContain(signature);
    expect(server.output()).not.toContain(forged.split('.')[2]!);
  });

  it('refuses to mint a token without a secret, or one that would allow nothing', async () => {
    const noSecret = await cli(['token', '--read', '*']);
    expect(noSecret.code).toBe(2);
    expect(noSecret.stderr).toMatch(/authSecret/);
    const nothing = await cli(['token'], { TAILWATER_AUTH_SECRET: SECRET });
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toMatch(/allow nothing/);
  });
});
