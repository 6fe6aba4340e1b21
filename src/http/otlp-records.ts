import { MAX_JSON_DEPTH } from '../model/bounded-json.js';
import { TailwaterError } from '../model/errors.js';
import type { NewEvent } from '../model/entry.js';
import { validateFqn, validateLabel, validateProducerKind, validateRunId } from '../model/names.js';
import type { AnyValue, KeyValue, ReceivedRecord } from './otlp-request.js';

/** The attributes that route a record (docs/OPENTELEMETRY.md, "Mapping"). */
export const ATTRIBUTE = {
  pipeline: 'tailwater.pipeline',
  runId: 'tailwater.run_id',
  step: 'tailwater.step',
  serviceName: 'service.name',
  serviceInstance: 'service.instance.id',
} as const;

/** The kind of an event made from a record with a structured body and no event name. */
export const DEFAULT_EVENT_KIND = 'otel.log';

/** One write of a request's records to one run: log text, or a batch of events. */
export type PlannedWrite =
  | {
      pipeline: string;
      runId: string;
      records: number;
      log: { text: string; step?: string; id: string };
    }
  | { pipeline: string; runId: string; records: number; events: NewEvent[] };

export interface WritePlan {
  writes: PlannedWrite[];
  rejected: number;
  /** Why records were refused, one line per distinct reason. */
  reasons: string[];
}

export interface PlanLimits {
  maxEventBytes: number;
  maxBatchEntries: number;
  maxAppendBytes: number;
}

type Item =
  | { kind: 'line'; text: string; step: string | undefined }
  | { kind: 'event'; event: Omit<NewEvent, 'id'> };

/**
 * What a request's records become, in their order: per run, consecutive lines of the same step
 * join into one log append and consecutive events into one batch. Every write gets an id made
 * of `idPrefix` (the request's digest) and its place, so a retried request, byte for byte the
 * same, is stored once. A record that cannot be stored (no pipeline, a bad name, too large) is
 * rejected alone; the others are still written.
 */
export function planWrites(
  records: readonly ReceivedRecord[],
  idPrefix: string,
  limits: PlanLimits,
  now: () => Date = () => new Date(),
): WritePlan {
  const perRun = new Map<string, { pipeline: string; runId: string; items: Item[] }>();
  const reasons = new Set<string>();
  let rejected = 0;
  for (const received of records) {
    try {
      const { pipeline, runId, item } = recordItem(received, limits, now);
      const key = JSON.stringify([pipeline, runId]);
      let run = perRun.get(key);
      if (!run) perRun.set(key, (run = { pipeline, runId, items: [] }));
      run.items.push(item);
    } catch (error) {
      if (!(error instanceof TailwaterError)) throw error;
      rejected += 1;
      reasons.add(error.message);
    }
  }
  const writes: PlannedWrite[] = [];
  const nextId = () => `otlp:${idPrefix}:${writes.length}`;
  for (const { pipeline, runId, items } of perRun.values()) {
    let index = 0;
    while (index < items.length) {
      const first = items[index]!;
      if (first.kind === 'line') {
        let text = '';
        let count = 0;
        for (; index < items.length; index += 1) {
          const item = items[index]!;
          if (item.kind !== 'line' || item.step !== first.step) break;
          if (count > 0 && byteLength(text) + byteLength(item.text) > limits.maxAppendBytes) break;
          text += item.text;
          count += 1;
        }
        const log = {
          text,
          id: nextId(),
          ...(first.step === undefined ? {} : { step: first.step }),
        };
        writes.push({ pipeline, runId, records: count, log });
      } else {
        const events: NewEvent[] = [];
        const id = nextId();
        for (; index < items.length && events.length < limits.maxBatchEntries; index += 1) {
          const item = items[index]!;
          if (item.kind !== 'event') break;
          events.push({ ...item.event, id: `${id}:${events.length}` });
        }
        writes.push({ pipeline, runId, records: events.length, events });
      }
    }
  }
  return { writes, rejected, reasons: [...reasons] };
}

function recordItem(
  { record, resource, traceId }: ReceivedRecord,
  limits: PlanLimits,
  now: () => Date,
): { pipeline: string; runId: string; item: Item } {
  const own = record.attributes ?? [];
  const pipelineName =
    stringAttribute(own, ATTRIBUTE.pipeline) ??
    stringAttribute(resource, ATTRIBUTE.pipeline) ??
    stringAttribute(resource, ATTRIBUTE.serviceName);
  if (pipelineName === undefined) {
    throw new TailwaterError(
      'TW_BAD_NAME',
      `A record names no pipeline: set the ${ATTRIBUTE.pipeline} attribute (or the resource's ${ATTRIBUTE.serviceName}).`,
    );
  }
  const pipeline = validateFqn(pipelineName);
  const runId = validateRunId(
    stringAttribute(own, ATTRIBUTE.runId) ??
      stringAttribute(resource, ATTRIBUTE.runId) ??
      stringAttribute(resource, ATTRIBUTE.serviceInstance) ??
      dayOf(record.timeUnixNano ?? record.observedTimeUnixNano, now),
  );
  const stepName =
    stringAttribute(own, ATTRIBUTE.step) ?? stringAttribute(resource, ATTRIBUTE.step);
  const step = stepName === undefined ? undefined : validateLabel('step', stepName);
  const body = record.body ?? {};
  if (isStructured(body)) {
    const kind = validateProducerKind(
      record.eventName !== undefined && record.eventName !== ''
        ? record.eventName
        : DEFAULT_EVENT_KIND,
    );
    const dataJson = JSON.stringify(toJson(body, 0));
    const bytes = byteLength(dataJson);
    if (bytes > limits.maxEventBytes) {
      throw new TailwaterError(
        'TW_EVENT_TOO_LARGE',
        `A record's body exceeds ${limits.maxEventBytes} bytes of JSON (was ${bytes}).`,
      );
    }
    const event: Omit<NewEvent, 'id'> = {
      kind,
      data: undefined,
      dataJson,
      ...(step === undefined ? {} : { step }),
      ...(traceId === undefined ? {} : { correlationId: traceId }),
    };
    return { pipeline, runId, item: { kind: 'event', event } };
  }
  const level = levelOf(record.severityText, record.severityNumber);
  const message = scalarText(body);
  const line = `${level === undefined ? '' : `${level.padEnd(5)} `}${message}`;
  return {
    pipeline,
    runId,
    item: { kind: 'line', text: line.endsWith('\n') ? line : `${line}\n`, step },
  };
}

function stringAttribute(list: readonly KeyValue[], key: string): string | undefined {
  // The last of repeated keys wins, as in a map.
  for (let index = list.length - 1; index >= 0; index -= 1) {
    const entry = list[index]!;
    if (entry.key !== key) continue;
    const value = entry.value?.stringValue;
    if (value === undefined || value === '') {
      throw new TailwaterError('TW_BAD_NAME', `The ${key} attribute must be a non-empty string.`);
    }
    return value;
  }
  return undefined;
}

/** The UTC day of a record's time (else of now): a record with no run id joins that day's run. */
function dayOf(timeUnixNano: string | number | undefined, now: () => Date): string {
  const nanos = timeUnixNano === undefined ? 0n : BigInt(timeUnixNano);
  const date = nanos > 0n ? new Date(Number(nanos / 1_000_000n)) : now();
  return date.toISOString().slice(0, 10);
}

const SEVERITY_NAMES = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'FATAL'];

/** The record's level as written, else the name of its severity number (1–24), else none. */
function levelOf(text: string | undefined, number: number | undefined): string | undefined {
  if (text !== undefined && text.trim() !== '') return text.trim().toUpperCase();
  if (number === undefined || number < 1 || number > 24) return undefined;
  return SEVERITY_NAMES[Math.floor((number - 1) / 4)];
}

function isStructured(value: AnyValue): boolean {
  return (
    value.kvlistValue !== undefined ||
    value.arrayValue !== undefined ||
    value.bytesValue !== undefined
  );
}

function scalarText(value: AnyValue): string {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return String(value.boolValue);
  if (value.intValue !== undefined) return String(value.intValue);
  if (value.doubleValue !== undefined) return String(value.doubleValue);
  return '';
}

/**
 * An AnyValue as JSON: maps become objects, arrays arrays, bytes base64 text; a 64-bit integer
 * is a number when it is exact as one, else its decimal text.
 */
function toJson(value: AnyValue, depth: number): unknown {
  if (depth > MAX_JSON_DEPTH) {
    throw new TailwaterError(
      'TW_BAD_REQUEST',
      `A record's body is nested deeper than ${MAX_JSON_DEPTH} levels.`,
    );
  }
  if (value.kvlistValue !== undefined) {
    // No prototype, so a key named __proto__ is a key like any other.
    const object: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    for (const { key, value: item } of value.kvlistValue.values ?? []) {
      object[key] = item === undefined ? null : toJson(item, depth + 1);
    }
    return object;
  }
  if (value.arrayValue !== undefined) {
    return (value.arrayValue.values ?? []).map((item) => toJson(item, depth + 1));
  }
  if (value.bytesValue !== undefined) return value.bytesValue;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) {
    const exact = Number(value.intValue);
    return Number.isSafeInteger(exact) ? exact : String(value.intValue);
  }
  // NaN and the infinities stay text ("NaN"), which JSON can hold.
  if (value.doubleValue !== undefined) {
    return Number.isFinite(value.doubleValue) ? value.doubleValue : String(value.doubleValue);
  }
  return null;
}

const byteLength = (text: string) => Buffer.byteLength(text, 'utf8');
