import { z } from 'zod';
import { TailwaterError } from '../model/errors.js';
import { decodeProtobufRequest } from './otlp-proto.js';

/**
 * An OTLP logs export request, in OTLP/JSON's shape: the protobuf encoding is decoded into the
 * same shape (otlp-proto.ts), so both are checked by these schemas. Unknown fields are ignored,
 * as the protocol asks of a receiver, so a newer exporter's requests are still read.
 */
export interface AnyValue {
  stringValue?: string | undefined;
  boolValue?: boolean | undefined;
  intValue?: string | number | undefined;
  doubleValue?: string | number | undefined;
  arrayValue?: { values?: AnyValue[] | undefined } | undefined;
  kvlistValue?: { values?: KeyValue[] | undefined } | undefined;
  bytesValue?: string | undefined;
}

export interface KeyValue {
  key: string;
  value?: AnyValue | undefined;
}

// 64-bit integers arrive as decimal strings (JSON may also give numbers).
const int64 = z.union([z.string().regex(/^-?\d+$/), z.number().int()]);

const anyValue: z.ZodType<AnyValue> = z.lazy(() =>
  z.object({
    stringValue: z.string().optional(),
    boolValue: z.boolean().optional(),
    intValue: int64.optional(),
    // JSON writes NaN and the infinities as strings.
    doubleValue: z.union([z.number(), z.enum(['NaN', 'Infinity', '-Infinity'])]).optional(),
    arrayValue: z.object({ values: z.array(anyValue).optional() }).optional(),
    kvlistValue: z.object({ values: z.array(keyValue).optional() }).optional(),
    bytesValue: z.string().optional(),
  }),
);

const keyValue: z.ZodType<KeyValue> = z.lazy(() =>
  z.object({ key: z.string(), value: anyValue.optional() }),
);

const attributes = z.array(keyValue).optional();

const logRecord = z.object({
  timeUnixNano: int64.optional(),
  observedTimeUnixNano: int64.optional(),
  severityNumber: z.number().int().optional(),
  severityText: z.string().optional(),
  body: anyValue.optional(),
  attributes,
  traceId: z.string().optional(),
  spanId: z.string().optional(),
  eventName: z.string().optional(),
});

const exportRequest = z.object({
  resourceLogs: z
    .array(
      z.object({
        resource: z.object({ attributes }).optional(),
        scopeLogs: z.array(z.object({ logRecords: z.array(logRecord).optional() })).optional(),
      }),
    )
    .optional(),
});

export type LogRecord = z.infer<typeof logRecord>;

/** One record with what it inherits from its resource, ids as lower-case hex. */
export interface ReceivedRecord {
  record: LogRecord;
  resource: readonly KeyValue[];
  traceId: string | undefined;
}

export const OTLP_MEDIA_TYPES = ['application/x-protobuf', 'application/json'] as const;

/**
 * The records of a request body, in order. Bad bytes, bad JSON or a body that is not an export
 * request are a 400; a body too deeply nested to walk is one too.
 */
export function readExportRequest(bytes: Buffer, mediaType: string): ReceivedRecord[] {
  const protobuf = mediaType === 'application/x-protobuf';
  let parsed: unknown;
  try {
    parsed = protobuf ? decodeProtobufRequest(bytes) : JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    if (error instanceof RangeError) throw tooDeep();
    throw new TailwaterError(
      protobuf ? 'TW_BAD_REQUEST' : 'TW_BAD_JSON',
      `The body is not an OTLP logs export request in ${protobuf ? 'protobuf' : 'JSON'}: ${(error as Error).message}`,
    );
  }
  let request: z.infer<typeof exportRequest>;
  try {
    const result = exportRequest.safeParse(parsed);
    if (!result.success) {
      const issue = result.error.issues[0]!;
      throw new TailwaterError(
        'TW_BAD_REQUEST',
        `The body is not an OTLP logs export request: ${issue.path.join('.')}: ${issue.message}`,
      );
    }
    request = result.data;
  } catch (error) {
    if (error instanceof RangeError) throw tooDeep();
    throw error;
  }
  const records: ReceivedRecord[] = [];
  for (const resourceLogs of request.resourceLogs ?? []) {
    const resource = resourceLogs.resource?.attributes ?? [];
    for (const scopeLogs of resourceLogs.scopeLogs ?? []) {
      for (const record of scopeLogs.logRecords ?? []) {
        records.push({ record, resource, traceId: traceIdHex(record.traceId, protobuf) });
      }
    }
  }
  return records;
}

function tooDeep(): TailwaterError {
  return new TailwaterError('TW_BAD_REQUEST', 'The body is nested too deeply to read.');
}

/**
 * OTLP/JSON writes trace ids in hex, protobuf as bytes (base64 once decoded here); an empty or
 * all-zero id is no id.
 */
function traceIdHex(id: string | undefined, base64: boolean): string | undefined {
  if (id === undefined || id === '') return undefined;
  const hex = base64 ? Buffer.from(id, 'base64').toString('hex') : id.toLowerCase();
  return /^[0-9a-f]+$/.test(hex) && !/^0+$/.test(hex) ? hex : undefined;
}
