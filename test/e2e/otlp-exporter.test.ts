import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SeverityNumber } from '@opentelemetry/api-logs';
import { OTLPLogExporter as JsonExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPLogExporter as ProtobufExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchLogRecordProcessor, LoggerProvider } from '@opentelemetry/sdk-logs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { readAllEntries } from '../helpers/api.js';
import { freePort } from '../helpers/net.js';
import { startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';
import { sleep } from '../helpers/wait.js';

// The real OpenTelemetry Node SDK (sdk-logs with the OTLP/HTTP JSON and protobuf exporters)
// pointed at a real `tailwater serve`: every record lands in its run, in order, once, also when
// answers are lost and when the server is killed and restarted mid-export
// (docs/OPENTELEMETRY.md).

const dirs: string[] = [];
const servers: ServerProcess[] = [];
const proxies: TcpProxy[] = [];
const providers: LoggerProvider[] = [];

afterEach(async () => {
  for (const provider of providers.splice(0)) await provider.shutdown().catch(() => undefined);
  for (const proxy of proxies.splice(0)) await proxy.close();
  for (const server of servers.splice(0)) await server.stop('SIGKILL');
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-otlp-'));
  dirs.push(dir);
  return dir;
}

async function serve(dir: string, port = 0): Promise<ServerProcess> {
  const server = await startServerProcess(['--data', dir, '--port', String(port)]);
  servers.push(server);
  return server;
}

type Encoding = 'json' | 'protobuf';

/** A logger whose records go to `url`/v1/logs, batched as a service would set it up. */
function otelLogger(
  url: string,
  encoding: Encoding,
  runId: string,
  compression: 'gzip' | 'none' = 'none',
) {
  const Exporter = encoding === 'json' ? JsonExporter : ProtobufExporter;
  // The default compression of the exporter is none; gzip is what collectors usually send.
  const exporter = new Exporter({ url: `${url}/v1/logs`, compression: compression as never });
  const provider = new LoggerProvider({
    resource: resourceFromAttributes({ 'service.name': 'otel.e2e', 'tailwater.run_id': runId }),
    processors: [
      new BatchLogRecordProcessor({ exporter, scheduledDelayMillis: 20, maxExportBatchSize: 50 }),
    ],
  });
  providers.push(provider);
  return { provider, logger: provider.getLogger('e2e') };
}

const runPath = (runId: string) => `/api/v1/pipelines/otel.e2e/runs/${runId}`;
const logLines = (entries: Entry[]) =>
  entries
    .filter((entry) => entry.kind === 'log')
    .map((entry) => (entry as { text: string }).text)
    .join('')
    .split('\n')
    .filter((line) => line !== '');

describe('the OpenTelemetry SDK exporting to tailwater serve', () => {
  for (const [encoding, compression] of [
    ['json', 'none'],
    ['json', 'gzip'],
    ['protobuf', 'none'],
    ['protobuf', 'gzip'],
  ] as const) {
    it(`stores lines and events in order, once (${encoding}, ${compression})`, async () => {
      const server = await serve(dataDir());
      const runId = `${encoding}-${compression}`;
      const { provider, logger } = otelLogger(server.url, encoding, runId, compression);
      for (let n = 0; n < 120; n += 1) {
        logger.emit({
          body: `line ${n}`,
          severityNumber: SeverityNumber.INFO,
          severityText: 'INFO',
        });
        if (n % 40 === 39) {
          logger.emit({
            eventName: 'train.epoch',
            body: { epoch: (n + 1) / 40, loss: 1 / (n + 1) },
            attributes: { 'tailwater.step': 'train' },
          });
        }
      }
      logger.emit({ body: 'it broke', severityNumber: SeverityNumber.ERROR });
      await provider.forceFlush();
      const entries = await readAllEntries(server.url, runPath(runId));
      expect(logLines(entries)).toEqual([
        ...Array.from({ length: 120 }, (_, n) => `INFO  line ${n}`),
        'ERROR it broke',
      ]);
      const epochs = entries.filter((entry) => entry.kind === 'train.epoch');
      expect(epochs.map((entry) => [entry.data, entry.step])).toEqual([
        [{ epoch: 1, loss: 1 / 40 }, 'train'],
        [{ epoch: 2, loss: 1 / 80 }, 'train'],
        [{ epoch: 3, loss: 1 / 120 }, 'train'],
      ]);
      // Each event sits right after the line it followed when emitted.
      let linesSoFar = 0;
      const linesBeforeEvents: number[] = [];
      for (const entry of entries) {
        if (entry.kind === 'log') linesSoFar += logLines([entry]).length;
        if (entry.kind === 'train.epoch') linesBeforeEvents.push(linesSoFar);
      }
      expect(linesBeforeEvents).toEqual([40, 80, 120]);
    });
  }

  it('stores each record once when answers are lost and the exporter retries what was stored', async () => {
    const server = await serve(dataDir());
    const proxy = await startTcpProxy(server.url);
    proxies.push(proxy);
    const { provider, logger } = otelLogger(proxy.url, 'protobuf', 'lost-answers');
    // The server stores each of these requests, then the proxy cuts the connection before the
    // answer reaches the exporter, which sees ECONNRESET and sends the same request again.
    proxy.dropNextResponses(3);
    for (let n = 0; n < 200; n += 1) logger.emit({ body: `record ${n}` });
    await provider.forceFlush();
    expect(proxy.droppedResponses).toBe(3);
    const entries = await readAllEntries(server.url, runPath('lost-answers'));
    expect(logLines(entries)).toEqual(Array.from({ length: 200 }, (_, n) => `record ${n}`));
  });

  for (const encoding of ['json', 'protobuf'] as const) {
    it(`loses and repeats nothing when the server is killed mid-export and restarted (${encoding})`, async () => {
      const dir = dataDir();
      const port = await freePort();
      let server = await serve(dir, port);
      const url = `http://127.0.0.1:${port}`;
      const { provider, logger } = otelLogger(url, encoding, 'restart');
      const TOTAL = 600;
      for (let n = 0; n < TOTAL; n += 1) {
        logger.emit({ body: `record ${n}` });
        if (n % 20 === 19) await sleep(5);
        if (n === 300) {
          // SIGKILL: whatever request is in flight is cut, stored or not.
          await server.stop('SIGKILL');
          servers.splice(servers.indexOf(server), 1);
        }
        if (n === 400) server = await serve(dir, port);
      }
      await provider.forceFlush();
      const entries = await readAllEntries(server.url, runPath('restart'));
      expect(logLines(entries)).toEqual(Array.from({ length: TOTAL }, (_, n) => `record ${n}`));
    });
  }
});
