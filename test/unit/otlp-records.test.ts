import { describe, expect, it } from 'vitest';
import { DEFAULT_EVENT_KIND, planWrites } from '../../src/http/otlp-records.js';
import type { PlannedWrite } from '../../src/http/otlp-records.js';
import type { AnyValue, KeyValue, LogRecord, ReceivedRecord } from '../../src/http/otlp-request.js';

// How OTLP log records become runs' log lines and events (docs/OPENTELEMETRY.md, "Mapping").

const LIMITS = { maxEventBytes: 1024, maxBatchEntries: 3, maxAppendBytes: 64 };
const NOW = () => new Date('2026-12-02T10:00:00Z');

const str = (value: string): AnyValue => ({ stringValue: value });
const attrs = (values: Record<string, string>): KeyValue[] =>
  Object.entries(values).map(([key, value]) => ({ key, value: str(value) }));

function received(
  record: LogRecord,
  resource: Record<string, string> = { 'service.name': 'etl.daily', 'tailwater.run_id': 'r1' },
  traceId?: string,
): ReceivedRecord {
  return { record, resource: attrs(resource), traceId };
}

const line = (text: string, extra: Partial<LogRecord> = {}) =>
  received({ body: str(text), ...extra });
const plan = (records: ReceivedRecord[]) => planWrites(records, 'digest', LIMITS, NOW);
const logOf = (write: PlannedWrite | undefined) =>
  write && 'log' in write ? write.log : undefined;
const eventsOf = (write: PlannedWrite | undefined) =>
  write && 'events' in write ? write.events : undefined;

describe('routing a record to a run', () => {
  it('takes the pipeline from the record attribute, then the resource attribute, then service.name', () => {
    const resource = {
      'service.name': 'svc',
      'tailwater.pipeline': 'from.resource',
      'tailwater.run_id': 'r',
    };
    const { writes } = plan([
      received(
        { body: str('a'), attributes: attrs({ 'tailwater.pipeline': 'from.record' }) },
        resource,
      ),
      received({ body: str('b') }, resource),
      received({ body: str('c') }, { 'service.name': 'svc', 'tailwater.run_id': 'r' }),
    ]);
    expect(writes.map((write) => write.pipeline)).toEqual(['from.record', 'from.resource', 'svc']);
  });

  it('takes the run from tailwater.run_id (record, then resource), then service.instance.id, then the UTC day of the record', () => {
    const day = BigInt(Date.parse('2026-11-30T23:59:59Z')) * 1_000_000n;
    const { writes } = plan([
      received({ body: str('a'), attributes: attrs({ 'tailwater.run_id': 'own' }) }),
      received({ body: str('b') }, { 'service.name': 'p', 'service.instance.id': 'instance-7' }),
      received({ body: str('c'), timeUnixNano: String(day) }, { 'service.name': 'p' }),
      received({ body: str('d') }, { 'service.name': 'p' }),
    ]);
    expect(writes.map((write) => write.runId)).toEqual([
      'own',
      'instance-7',
      '2026-11-30',
      '2026-12-02',
    ]);
  });

  it('refuses, alone, a record that names no pipeline or a bad one, and says why', () => {
    const result = plan([
      line('kept'),
      received({ body: str('lost') }, { 'tailwater.run_id': 'r1' }),
      received({
        body: str('lost too'),
        attributes: [{ key: 'tailwater.pipeline', value: { intValue: 5 } }],
      }),
    ]);
    expect(result.rejected).toBe(2);
    expect(result.reasons.join('\n')).toMatch(/names no pipeline/);
    expect(result.reasons.join('\n')).toMatch(
      /tailwater\.pipeline attribute must be a non-empty string/,
    );
    expect(logOf(result.writes[0])?.text).toBe('kept\n');
  });
});

describe('log lines', () => {
  it('prefixes each line with its level, from the severity text or else the severity number', () => {
    const { writes } = plan([
      line('starting', { severityText: 'info' }),
      line('careful', { severityNumber: 13 }),
      line('broken', { severityNumber: 18 }),
      line('plain'),
      line('already ended\n', { severityNumber: 21 }),
    ]);
    expect(writes.map((write) => logOf(write)?.text).join('')).toBe(
      'INFO  starting\nWARN  careful\nERROR broken\nplain\nFATAL already ended\n',
    );
  });

  it('joins consecutive lines of a run and step into one append, and splits at a new step', () => {
    const step = (name: string) => ({ attributes: attrs({ 'tailwater.step': name }) });
    const { writes } = plan([
      line('a', step('load')),
      line('b', step('load')),
      line('c', step('train')),
    ]);
    expect(writes.map((write) => logOf(write))).toEqual([
      { text: 'a\nb\n', step: 'load', id: 'otlp:digest:0' },
      { text: 'c\n', step: 'train', id: 'otlp:digest:1' },
    ]);
    expect(writes.map((write) => write.records)).toEqual([2, 1]);
  });

  it('cuts an append before it would pass maxAppendBytes', () => {
    const long = 'x'.repeat(40);
    const { writes } = plan([line(long), line(long), line(long)]);
    expect(writes.map((write) => logOf(write)?.text.length)).toEqual([41, 41, 41]);
  });

  it('writes a scalar body as its text', () => {
    const { writes } = plan([
      received({ body: { intValue: '42' } }),
      received({ body: { boolValue: true } }),
      received({ body: { doubleValue: 0.5 } }),
    ]);
    expect(logOf(writes[0])?.text).toBe('42\ntrue\n0.5\n');
  });
});

describe('events', () => {
  it('makes a structured body an event: kind from the event name, step, correlation id from the trace id', () => {
    const body: AnyValue = {
      kvlistValue: {
        values: [
          { key: 'epoch', value: { intValue: '3' } },
          { key: 'loss', value: { doubleValue: 0.25 } },
          { key: 'big', value: { intValue: '9007199254740993' } },
          { key: 'tags', value: { arrayValue: { values: [str('a'), { boolValue: false }] } } },
          { key: '__proto__', value: str('just a key') },
        ],
      },
    };
    const { writes } = plan([
      received(
        { body, eventName: 'train.epoch', attributes: attrs({ 'tailwater.step': 'train' }) },
        undefined,
        'ab'.repeat(16),
      ),
    ]);
    const [event] = eventsOf(writes[0])!;
    expect(event).toMatchObject({
      kind: 'train.epoch',
      step: 'train',
      correlationId: 'ab'.repeat(16),
      id: 'otlp:digest:0:0',
    });
    expect(JSON.parse(event!.dataJson!)).toEqual(
      JSON.parse(
        '{"epoch":3,"loss":0.25,"big":"9007199254740993","tags":["a",false],"__proto__":"just a key"}',
      ),
    );
  });

  it(`gives an event without a name the kind ${DEFAULT_EVENT_KIND}, and batches at most maxBatchEntries`, () => {
    const event = received({ body: { arrayValue: { values: [] } } });
    const { writes } = plan([event, event, event, event]);
    expect(writes.map((write) => eventsOf(write)?.map((e) => e.kind))).toEqual([
      [DEFAULT_EVENT_KIND, DEFAULT_EVENT_KIND, DEFAULT_EVENT_KIND],
      [DEFAULT_EVENT_KIND],
    ]);
  });

  it('keeps lines and events of a run in their order, as separate writes', () => {
    const { writes } = plan([
      line('before'),
      received({ body: { kvlistValue: {} } }),
      line('after'),
    ]);
    expect(writes.map((write) => ('log' in write ? write.log.text : 'event'))).toEqual([
      'before\n',
      'event',
      'after\n',
    ]);
  });

  it('refuses an event over maxEventBytes, a reserved or malformed kind, and a body nested too deep', () => {
    let deep: AnyValue = str('bottom');
    for (let level = 0; level < 80; level += 1) deep = { arrayValue: { values: [deep] } };
    const result = plan([
      received({ body: { bytesValue: 'A'.repeat(2000) } }),
      received({ body: { kvlistValue: {} }, eventName: 'end' }),
      received({ body: { kvlistValue: {} }, eventName: 'has space' }),
      received({ body: deep }),
    ]);
    expect(result.rejected).toBe(4);
    expect(result.writes).toEqual([]);
    expect(result.reasons.join('\n')).toMatch(/exceeds 1024 bytes/);
    expect(result.reasons.join('\n')).toMatch(/reserved/);
    expect(result.reasons.join('\n')).toMatch(/nested deeper than 64/);
  });
});

describe('ids', () => {
  it('are the same for the same request, so a retry is stored once, and differ between requests', () => {
    const records = [line('a'), received({ body: { kvlistValue: {} } }), line('b')];
    const ids = (prefix: string) =>
      planWrites(records, prefix, LIMITS, NOW).writes.flatMap((write) =>
        'log' in write ? [write.log.id] : write.events.map((event) => event.id),
      );
    expect(ids('one')).toEqual(ids('one'));
    expect(ids('one')).toEqual(['otlp:one:0', 'otlp:one:1:0', 'otlp:one:2']);
    expect(ids('two')).not.toEqual(ids('one'));
  });
});
