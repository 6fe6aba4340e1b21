import protobuf from 'protobufjs/light.js';

/**
 * The OTLP/HTTP logs messages Tailwater reads and writes, as a protobuf.js schema: the field
 * numbers and types of the OpenTelemetry protocol's `logs_service.proto`, `logs.proto`,
 * `common.proto` and `resource.proto`, and `google.rpc.Status` for error answers. Only the
 * schema is declared here; protobuf.js does the decoding and encoding. Fields Tailwater does
 * not use (entity refs, string-table indexes) are left out: a decoder skips unknown fields, as
 * protobuf requires, so a newer exporter's messages still decode (docs/OPENTELEMETRY.md).
 */
const fields = (
  entries: Record<string, [id: number, type: string, rule?: 'repeated']>,
): Record<string, { id: number; type: string; rule?: string }> =>
  Object.fromEntries(
    Object.entries(entries).map(([name, [id, type, rule]]) => [
      name,
      rule ? { id, type, rule } : { id, type },
    ]),
  );

const root = protobuf.Root.fromJSON({
  nested: {
    otlp: {
      nested: {
        ExportLogsServiceRequest: {
          fields: fields({ resourceLogs: [1, 'ResourceLogs', 'repeated'] }),
        },
        ExportLogsServiceResponse: {
          fields: fields({ partialSuccess: [1, 'ExportLogsPartialSuccess'] }),
        },
        ExportLogsPartialSuccess: {
          fields: fields({ rejectedLogRecords: [1, 'int64'], errorMessage: [2, 'string'] }),
        },
        ResourceLogs: {
          fields: fields({
            resource: [1, 'Resource'],
            scopeLogs: [2, 'ScopeLogs', 'repeated'],
            schemaUrl: [3, 'string'],
          }),
        },
        Resource: {
          fields: fields({
            attributes: [1, 'KeyValue', 'repeated'],
            droppedAttributesCount: [2, 'uint32'],
          }),
        },
        ScopeLogs: {
          fields: fields({
            scope: [1, 'InstrumentationScope'],
            logRecords: [2, 'LogRecord', 'repeated'],
            schemaUrl: [3, 'string'],
          }),
        },
        InstrumentationScope: {
          fields: fields({
            name: [1, 'string'],
            version: [2, 'string'],
            attributes: [3, 'KeyValue', 'repeated'],
            droppedAttributesCount: [4, 'uint32'],
          }),
        },
        LogRecord: {
          fields: fields({
            timeUnixNano: [1, 'fixed64'],
            observedTimeUnixNano: [11, 'fixed64'],
            severityNumber: [2, 'int32'],
            severityText: [3, 'string'],
            body: [5, 'AnyValue'],
            attributes: [6, 'KeyValue', 'repeated'],
            droppedAttributesCount: [7, 'uint32'],
            flags: [8, 'fixed32'],
            traceId: [9, 'bytes'],
            spanId: [10, 'bytes'],
            eventName: [12, 'string'],
          }),
        },
        AnyValue: {
          oneofs: {
            value: {
              oneof: [
                'stringValue',
                'boolValue',
                'intValue',
                'doubleValue',
                'arrayValue',
                'kvlistValue',
                'bytesValue',
              ],
            },
          },
          fields: fields({
            stringValue: [1, 'string'],
            boolValue: [2, 'bool'],
            intValue: [3, 'int64'],
            doubleValue: [4, 'double'],
            arrayValue: [5, 'ArrayValue'],
            kvlistValue: [6, 'KeyValueList'],
            bytesValue: [7, 'bytes'],
          }),
        },
        ArrayValue: { fields: fields({ values: [1, 'AnyValue', 'repeated'] }) },
        KeyValueList: { fields: fields({ values: [1, 'KeyValue', 'repeated'] }) },
        KeyValue: { fields: fields({ key: [1, 'string'], value: [2, 'AnyValue'] }) },
        Status: {
          fields: fields({ code: [1, 'int32'], message: [2, 'string'] }),
        },
      },
    },
  },
});

const requestType = root.lookupType('otlp.ExportLogsServiceRequest');
const responseType = root.lookupType('otlp.ExportLogsServiceResponse');
const statusType = root.lookupType('otlp.Status');

/**
 * A protobuf request as plain objects in OTLP/JSON's shape (camelCase names, 64-bit numbers
 * as decimal strings, bytes as base64), so one validation reads both encodings. Throws
 * protobuf.js's error on bytes that are not a request.
 */
export function decodeProtobufRequest(bytes: Uint8Array): unknown {
  const message = requestType.decode(bytes);
  return requestType.toObject(message, { longs: String, bytes: String, defaults: false });
}

export function encodeProtobufResponse(response: object): Buffer {
  return Buffer.from(responseType.encode(responseType.fromObject(response)).finish());
}

export function encodeProtobufStatus(status: { code: number; message: string }): Buffer {
  return Buffer.from(statusType.encode(statusType.fromObject(status)).finish());
}

/** A request in OTLP/JSON's shape, encoded as an exporter sends it in protobuf. */
export function encodeProtobufRequest(request: object): Buffer {
  return Buffer.from(requestType.encode(requestType.fromObject(request)).finish());
}
