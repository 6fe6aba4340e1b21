import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

// TLS when given a certificate and key (docs/SECURITY.md, "Facing a network").

const apps: TestApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

/** A self-signed certificate for 127.0.0.1, kept for these tests (test/fixtures/tls). */
function selfSigned(): { cert: string; key: string } {
  const dir = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));
  return { cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem') };
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
