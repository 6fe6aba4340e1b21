import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

// TLS when given a certificate and key (docs/SECURITY.md, "Facing a network"), with a
// self-signed certificate made for the test by the machine's openssl.

const apps: TestApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

function selfSigned(): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-tls-'));
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}

describe('TLS', () => {
  it('serves HTTPS with the given certificate, streams included, and no plain HTTP on the port', async () => {
    const { cert, key } = selfSigned();
    const t = await createTestApp({ tlsCert: cert, tlsKey: key, pollSeconds: 0.05 });
    apps.push(t);
    await t.listen();
    const port = new URL(t.url).port;
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'over tls\n' });
    const dispatcher = new Agent({ connect: { ca: readFileSync(cert) } });
    const run = await undiciFetch(`https://127.0.0.1:${port}/api/v1/pipelines/etl.daily/runs/r1`, {
      dispatcher,
    });
    expect(run.status).toBe(200);
    const stream = await undiciFetch(
      `https://127.0.0.1:${port}/api/v1/pipelines/etl.daily/runs/r1/stream`,
      { dispatcher },
    );
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = stream.body!.getReader();
    let text = '';
    while (!text.includes('over tls')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString();
    }
    expect(text).toContain('over tls');
    await reader.cancel();
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    await dispatcher.close();
  });

  it('refuses to start with only one of the two files, or one it cannot read', async () => {
    await expect(createTestApp({ tlsCert: '/nonexistent.pem' })).rejects.toThrow(/^tls: /);
    await expect(
      createTestApp({ tlsCert: '/nonexistent.pem', tlsKey: '/nonexistent.key' }),
    ).rejects.toThrow(/^tlsCert: cannot read/);
  });
});
