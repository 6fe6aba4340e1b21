import { gzipSync } from 'node:zlib';
import { ProtobufLogsSerializer } from '@opentelemetry/otlp-transformer';
import { SignJWT } from 'jose';
import protobuf from 'protobufjs/light.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { encodeProtobufRequest } from '../../src/http/otlp-proto.js';
import { TailwaterError } from '../../src/model/errors.js';
import type { PartialSettings } from '../../src/model/settings.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

// OTLP/HTTP logs ingest at POST /v1/logs (docs/OPENTELEMETRY.md): both encodings, gzip, the
// protocol's success, partial-success and error answers, retries stored once, scopes.

const apps: TestApp[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const app of apps.splice(0)) await app.close();
});

async function start(overrides: PartialSettings = {}) {
  const t = await createTestApp(overrides);
  apps.push(t);
  await t.listen();
  return t;
}

const str = (value: string) => ({ stringValue: value });
const attributes = (values: Record<string, string>) =>
  Object.entries(values).map(([key, value]) => ({ key, value: str(value) }));

type RecordShape = Record<string, unknown>;

/** An export request in OTLP/JSON's shape: one resource per entry of `resources`. */
function exportRequest(
  ...resources: Array<{ attrs: Record<string, string>; records: RecordShape[] }>
) {
  return {
    resourceLogs: resources.map(({ attrs, records }) => ({
      resource: { attributes: attributes(attrs) },
      scopeLogs: [{ scope: { name: 'test' }, logRecords: records }],
    })),
  };
}

const RUN = { 'service.name': 'etl.daily', 'tailwater.run_id': 'r1' };
const lines = (...texts: string[]) =>
  texts.map((text) => ({
    body: str(text),
    severityNumber: 9,
    timeUnixNano: '1764669600000000000',
  }));

const SECRET = 'a-test-secret-of-more-than-thirty-two-bytes';
const token = (claim: { write?: string[]; admin?: boolean }) =>
  new SignJWT({ tailwater: claim })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('1h')
    .sign(new TextEncoder().encode(SECRET));
const adminToken = () => token({ admin: true });

const statusType = protobuf.Type.fromJSON('Status', {
  fields: { code: { id: 1, type: 'int32' }, message: { id: 2, type: 'string' } },
});

interface Answer {
  statusCode: number;
  headers: Record<string, string>;
  rawPayload: Buffer;
  json(): unknown;
}

/** Over a real socket, as an exporter sends: refused bodies close their connection. */
async function post(
  t: TestApp,
  body: Buffer | string,
  headers: Record<string, string>,
): Promise<Answer> {
  const response = await fetch(`${t.url}/v1/logs`, { method: 'POST', body, headers });
  const rawPayload = Buffer.from(await response.arrayBuffer());
  return {
    statusCode: response.status,
    headers: Object.fromEntries(response.headers),
    rawPayload,
    json: () => JSON.parse(rawPayload.toString('utf8')),
  };
}

const PROTOBUF = { 'content-type': 'application/x-protobuf' };
const JSON_TYPE = { 'content-type': 'application/json' };

/** The run's log as stored (read from the store, so it needs no token). */
async function logText(t: TestApp, pipeline = 'etl.daily', run = 'r1') {
  const answer = await t.app.inject({
    url: `/api/v1/pipelines/${pipeline}/runs/${run}/log.txt`,
    headers: t.settings.authSecret ? { authorization: `Bearer ${await adminToken()}` } : {},
  });
  return answer.statusCode === 200 ? answer.body : `(${answer.statusCode})`;
}

async function entries(t: TestApp, pipeline = 'etl.daily', run = 'r1') {
  const answer = await t.app.inject(`/api/v1/pipelines/${pipeline}/runs/${run}/entries`);
  return (answer.json() as { entries: Array<Record<string, unknown>> }).entries;
}

describe('POST /v1/logs stores records', () => {
  it('in protobuf: answers an empty ExportLogsServiceResponse in protobuf, and the lines are in the run in order', async () => {
    const t = await start();
    const body = encodeProtobufRequest(
      exportRequest({ attrs: RUN, records: lines('one', 'two', 'three') }),
    );
    const answer = await post(t, body, PROTOBUF);
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['content-type']).toBe('application/x-protobuf');
    expect(ProtobufLogsSerializer.deserializeResponse(answer.rawPayload)).toEqual({});
    expect(await logText(t)).toBe('INFO  one\nINFO  two\nINFO  three\n');
  });

  it('in JSON, gzip-compressed: answers {} in JSON', async () => {
    const t = await start();
    const body = gzipSync(JSON.stringify(exportRequest({ attrs: RUN, records: lines('zipped') })));
    const answer = await post(t, body, { ...JSON_TYPE, 'content-encoding': 'gzip' });
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['content-type']).toMatch(/^application\/json/);
    expect(answer.json()).toEqual({});
    expect(await logText(t)).toBe('INFO  zipped\n');
  });

  it('a structured body as an event with its trace id as correlation id (hex in JSON, bytes in protobuf)', async () => {
    const t = await start();
    const traceHex = '0af7651916cd43dd8448eb211c80319c';
    const record = (traceId: string) => ({
      eventName: 'train.epoch',
      body: { kvlistValue: { values: [{ key: 'epoch', value: { intValue: '2' } }] } },
      traceId,
    });
    await post(
      t,
      JSON.stringify(exportRequest({ attrs: RUN, records: [record(traceHex)] })),
      JSON_TYPE,
    );
    await post(
      t,
      encodeProtobufRequest(
        exportRequest({
          attrs: RUN,
          records: [record(Buffer.from(traceHex, 'hex').toString('base64'))],
        }),
      ),
      PROTOBUF,
    );
    const events = (await entries(t)).filter((entry) => entry['kind'] === 'train.epoch');
    expect(events.map((event) => [event['data'], event['correlationId']])).toEqual([
      [{ epoch: 2 }, traceHex],
      [{ epoch: 2 }, traceHex],
    ]);
  });

  it('records of several resources go to their own runs', async () => {
    const t = await start();
    const body = encodeProtobufRequest(
      exportRequest(
        { attrs: RUN, records: lines('to r1') },
        {
          attrs: { 'service.name': 'ml.train', 'tailwater.run_id': 'r9' },
          records: lines('to r9'),
        },
      ),
    );
    expect((await post(t, body, PROTOBUF)).statusCode).toBe(200);
    expect(await logText(t)).toBe('INFO  to r1\n');
    expect(await logText(t, 'ml.train', 'r9')).toBe('INFO  to r9\n');
  });
});

describe('retries', () => {
  it('the same request sent again (an exporter retry) is acknowledged and stored once', async () => {
    const t = await start();
    const body = encodeProtobufRequest(
      exportRequest({
        attrs: RUN,
        records: [...lines('a', 'b'), { body: { kvlistValue: { values: [] } } }, ...lines('c')],
      }),
    );
    for (let attempt = 0; attempt < 3; attempt += 1) {
      expect((await post(t, body, PROTOBUF)).statusCode).toBe(200);
    }
    expect(await logText(t)).toBe('INFO  a\nINFO  b\nINFO  c\n');
    expect((await entries(t)).filter((entry) => entry['kind'] === 'otel.log')).toHaveLength(1);
  });

  it('after the store failed mid-request (503 with Retry-After), the retry stores what was missing, once', async () => {
    const t = await start();
    const body = encodeProtobufRequest(
      exportRequest(
        { attrs: RUN, records: lines('first run') },
        {
          attrs: { 'service.name': 'ml.train', 'tailwater.run_id': 'r9' },
          records: lines('second run'),
        },
      ),
    );
    const append = t.ingest.appendLog.bind(t.ingest);
    let calls = 0;
    vi.spyOn(t.ingest, 'appendLog').mockImplementation(async (pipeline, runId, log) => {
      calls += 1;
      if (calls === 2)
        throw new TailwaterError('TW_STORE_UNAVAILABLE', 'PostgreSQL is not answering.');
      return append(pipeline, runId, log);
    });
    const refused = await post(t, body, PROTOBUF);
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    const status = statusType.toObject(statusType.decode(refused.rawPayload));
    expect(status).toEqual({
      code: 14,
      message: 'TW_STORE_UNAVAILABLE: PostgreSQL is not answering.',
    });
    expect((await post(t, body, PROTOBUF)).statusCode).toBe(200);
    expect(await logText(t)).toBe('INFO  first run\n');
    expect(await logText(t, 'ml.train', 'r9')).toBe('INFO  second run\n');
  });
});

describe('/metrics', () => {
  it('counts records stored, sent again (retries) and rejected', async () => {
    const t = await start();
    const body = encodeProtobufRequest(
      exportRequest(
        { attrs: RUN, records: [...lines('a', 'b'), { body: { kvlistValue: {} } }] },
        { attrs: { 'tailwater.run_id': 'r1' }, records: lines('no pipeline') },
      ),
    );
    await post(t, body, PROTOBUF);
    await post(t, body, PROTOBUF);
    const metrics = (await t.app.inject('/metrics')).body;
    const count = (outcome: string) =>
      Number(
        new RegExp(`^tailwater_otlp_log_records_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(
          metrics,
        )?.[1],
      );
    expect([count('stored'), count('duplicate'), count('rejected')]).toEqual([3, 3, 2]);
  });
});

describe('partial success', () => {
  it('stores the records it can and counts and explains the others (protobuf, read by OpenTelemetry’s own deserializer)', async () => {
    const t = await start();
    const body = encodeProtobufRequest(
      exportRequest(
        { attrs: RUN, records: lines('kept') },
        { attrs: { 'tailwater.run_id': 'r1' }, records: lines('no pipeline', 'nor this') },
        { attrs: RUN, records: [{ body: { kvlistValue: {} }, eventName: 'end' }] },
      ),
    );
    const answer = await post(t, body, PROTOBUF);
    expect(answer.statusCode).toBe(200);
    const response = ProtobufLogsSerializer.deserializeResponse(answer.rawPayload);
    expect(Number(response.partialSuccess?.rejectedLogRecords)).toBe(3);
    expect(response.partialSuccess?.errorMessage).toMatch(/names no pipeline.*; .*reserved/);
    expect(await logText(t)).toBe('INFO  kept\n');
  });

  it('in JSON', async () => {
    const t = await start();
    const body = JSON.stringify(
      exportRequest({ attrs: { 'tailwater.run_id': 'r1' }, records: lines('x') }),
    );
    const answer = await post(t, body, JSON_TYPE);
    expect(answer.statusCode).toBe(200);
    expect(answer.json()).toEqual({
      partialSuccess: {
        rejectedLogRecords: '1',
        errorMessage: expect.stringMatching(/names no pipeline/),
      },
    });
  });
});

describe('bad requests get the protocol’s error answer and store nothing', () => {
  const cases: Array<{
    name: string;
    body: Buffer | string;
    headers: Record<string, string>;
    status: number;
    code: number;
    tw: string;
  }> = [
    {
      name: 'bytes that are not protobuf',
      body: Buffer.from([0x0a, 0xff, 0xff, 0xff]),
      headers: PROTOBUF,
      status: 400,
      code: 3,
      tw: 'TW_BAD_REQUEST',
    },
    {
      name: 'malformed JSON',
      body: '{"resourceLogs": [',
      headers: JSON_TYPE,
      status: 400,
      code: 3,
      tw: 'TW_BAD_JSON',
    },
    {
      name: 'JSON that is not an export request',
      body: '{"resourceLogs": 5}',
      headers: JSON_TYPE,
      status: 400,
      code: 3,
      tw: 'TW_BAD_REQUEST',
    },
    {
      name: 'a trace id of the wrong type',
      body: JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ traceId: 7 }] }] }] }),
      headers: JSON_TYPE,
      status: 400,
      code: 3,
      tw: 'TW_BAD_REQUEST',
    },
    {
      name: 'text/plain',
      body: 'a line',
      headers: { 'content-type': 'text/plain' },
      status: 415,
      code: 3,
      tw: 'TW_UNSUPPORTED_MEDIA_TYPE',
    },
    {
      name: 'a Content-Encoding other than gzip',
      body: '{}',
      headers: { ...JSON_TYPE, 'content-encoding': 'br' },
      status: 415,
      code: 3,
      tw: 'TW_UNSUPPORTED_MEDIA_TYPE',
    },
    {
      name: 'gzip that is not gzip',
      body: 'not gzip',
      headers: { ...JSON_TYPE, 'content-encoding': 'gzip' },
      status: 400,
      code: 3,
      tw: 'TW_BAD_REQUEST',
    },
    {
      name: 'a gzip bomb (20 KiB inflating to 32 MiB)',
      body: gzipSync(Buffer.alloc(32 * 1024 * 1024, 0x20)),
      headers: { ...JSON_TYPE, 'content-encoding': 'gzip' },
      status: 413,
      code: 8,
      tw: 'TW_BODY_TOO_LARGE',
    },
    {
      name: 'a body over the limit',
      body: JSON.stringify({ pad: 'x'.repeat(9 * 1024 * 1024) }),
      headers: JSON_TYPE,
      status: 413,
      code: 8,
      tw: 'TW_BODY_TOO_LARGE',
    },
  ];
  for (const { name, body, headers, status, code, tw } of cases) {
    it(`${name}: ${status}`, async () => {
      const t = await start();
      await post(
        t,
        encodeProtobufRequest(exportRequest({ attrs: RUN, records: lines('already here') })),
        PROTOBUF,
      );
      const answer = await post(t, body, headers);
      expect(answer.statusCode).toBe(status);
      const protobufAnswer = headers['content-type'] === PROTOBUF['content-type'];
      const decoded = protobufAnswer
        ? statusType.toObject(statusType.decode(answer.rawPayload))
        : (answer.json() as { code: number; message: string });
      expect(decoded.code).toBe(code);
      expect(decoded.message).toMatch(new RegExp(`^${tw}: `));
      expect(await logText(t)).toBe('INFO  already here\n');
    });
  }
});

describe('with authentication on', () => {
  const body = JSON.stringify(
    exportRequest(
      { attrs: RUN, records: lines('etl line') },
      {
        attrs: { 'service.name': 'ml.train', 'tailwater.run_id': 'r9' },
        records: lines('ml line'),
      },
    ),
  );

  it('without a token: 401 with WWW-Authenticate, in OTLP’s error shape', async () => {
    const t = await start({ authSecret: SECRET });
    const answer = await post(t, body, JSON_TYPE);
    expect(answer.statusCode).toBe(401);
    expect(answer.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(answer.json()).toMatchObject({
      code: 16,
      message: expect.stringMatching(/^TW_UNAUTHENTICATED: /),
    });
  });

  it('a token that may write only some of the pipelines named: 403, and none of the request is stored', async () => {
    const t = await start({ authSecret: SECRET });
    const answer = await post(t, body, {
      ...JSON_TYPE,
      authorization: `Bearer ${await token({ write: ['pipeline:etl.*'] })}`,
    });
    expect(answer.statusCode).toBe(403);
    expect(answer.json()).toMatchObject({
      code: 7,
      message: 'TW_FORBIDDEN: This token may not write ml.train.',
    });
    expect(await logText(t)).toBe('(404)');
  });

  it('a token that may write them all: stored', async () => {
    const t = await start({ authSecret: SECRET });
    const authorization = `Bearer ${await token({ write: ['pipeline:etl.*', 'pipeline:ml.*'] })}`;
    expect((await post(t, body, { ...JSON_TYPE, authorization })).statusCode).toBe(200);
    expect(await logText(t, 'ml.train', 'r9')).toBe('INFO  ml line\n');
  });

  it('past appendsPerMinutePerToken: 429 with Retry-After, which exporters retry', async () => {
    const t = await start({ authSecret: SECRET, appendsPerMinutePerToken: 1 });
    const authorization = `Bearer ${await token({ write: ['pipeline:*'] })}`;
    expect((await post(t, body, { ...JSON_TYPE, authorization })).statusCode).toBe(200);
    const limited = await post(t, body, { ...JSON_TYPE, authorization });
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(limited.json()).toMatchObject({
      code: 8,
      message: expect.stringMatching(/^TW_TOO_MANY_APPENDS: /),
    });
  });
});
