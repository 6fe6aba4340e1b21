import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_STATUS, TailwaterError } from '../model/errors.js';
import { pipelineResource } from '../model/scopes.js';
import { runKey } from '../model/stream-key.js';
import { mayWrite } from './auth.js';
import { RawBody } from './body.js';
import type { AppDeps } from './deps.js';
import { closeIfBodyUnread, toTailwaterError } from './errors.js';
import { encodeProtobufResponse, encodeProtobufStatus } from './otlp-proto.js';
import type { PlannedWrite } from './otlp-records.js';
import { planWrites } from './otlp-records.js';
import { OTLP_MEDIA_TYPES, readExportRequest } from './otlp-request.js';
import type { OtlpStats } from './otlp-stats.js';

/** OpenTelemetry's standard path for OTLP/HTTP logs, on Tailwater's own port. */
export const OTLP_LOGS_ROUTE = '/v1/logs';

/** The google.rpc codes of the statuses an OTLP answer can have (the Status message's `code`). */
const RPC_CODE: Record<number, number> = {
  400: 3, // INVALID_ARGUMENT
  401: 16, // UNAUTHENTICATED
  403: 7, // PERMISSION_DENIED
  404: 5, // NOT_FOUND
  408: 4, // DEADLINE_EXCEEDED
  409: 9, // FAILED_PRECONDITION
  413: 8, // RESOURCE_EXHAUSTED
  415: 3,
  421: 3,
  429: 8,
  431: 8,
  500: 13, // INTERNAL
  503: 14, // UNAVAILABLE
};

/** How many of the reasons records were refused a partial success names. */
const MAX_REASONS = 3;

/**
 * OTLP/HTTP logs ingest (docs/OPENTELEMETRY.md): an OpenTelemetry exporter pointed at Tailwater
 * stores its log records as runs' log lines and events. Answers speak OTLP: the response (or
 * google.rpc.Status) in the request's encoding, partial success for records that could not be
 * stored, and 429/503 with Retry-After, which exporters retry. Retries are stored once.
 */
export async function otlpRoutes(
  app: FastifyInstance,
  deps: AppDeps & { otlpStats: OtlpStats },
): Promise<void> {
  const { settings, ingest, otlpStats } = deps;
  app.setErrorHandler((error, request, reply) => {
    const refused = toTailwaterError(error);
    if (refused.code === 'TW_INTERNAL') request.log.error({ err: error }, 'OTLP export failed');
    if (reply.sent || reply.raw.headersSent) return;
    closeIfBodyUnread(request, reply);
    const status = ERROR_STATUS[refused.code];
    // Exporters retry 429 and 503 after Retry-After, or their own backoff without one.
    const retryAfter = status === 429 || status === 503 ? { 'Retry-After': '1' } : {};
    void reply.code(status).headers({ ...retryAfter, ...refused.headers });
    sendOtlp(request, reply, 'status', {
      code: RPC_CODE[status] ?? 2,
      message: `${refused.code}: ${refused.message}`,
    });
  });

  app.post(
    OTLP_LOGS_ROUTE,
    {
      // Measured after gzip is undone: a batch of an exporter's records, with room to spare.
      bodyLimit: settings.maxAppendBytes,
      config: { bytes: { mediaTypes: OTLP_MEDIA_TYPES }, checksOwnScopes: true },
    },
    async (request, reply) => {
      if (!(request.body instanceof RawBody)) {
        throw new TailwaterError(
          'TW_UNSUPPORTED_MEDIA_TYPE',
          `Unsupported content type: this endpoint takes ${OTLP_MEDIA_TYPES.join(' or ')}.`,
        );
      }
      const { bytes, mediaType } = request.body;
      const records = readExportRequest(bytes, mediaType);
      // The digest of the request names its writes: an exporter's retry, the same bytes, is
      // acknowledged without being stored again.
      const digest = createHash('sha256').update(bytes).digest('base64url').slice(0, 22);
      const plan = planWrites(records, digest, settings);
      // All or nothing for scopes: a token refused one pipeline writes none of the request.
      for (const pipeline of new Set(plan.writes.map((write) => write.pipeline))) {
        if (!mayWrite(request, pipelineResource(pipeline))) {
          throw new TailwaterError('TW_FORBIDDEN', `This token may not write ${pipeline}.`);
        }
      }
      let rejected = plan.rejected;
      const reasons = [...plan.reasons];
      for (const write of plan.writes) {
        try {
          const duplicates = await store(write);
          otlpStats.duplicates += duplicates;
          otlpStats.stored += write.records - duplicates;
        } catch (error) {
          // A write the store refuses (an id taken by other content) refuses these records, not
          // the request; the store being away is the request's failure, which the exporter
          // retries.
          if (!(error instanceof TailwaterError) || error.status >= 500) throw error;
          rejected += write.records;
          if (!reasons.includes(error.message)) reasons.push(error.message);
        }
      }
      otlpStats.rejected += rejected;
      const response =
        rejected === 0
          ? {}
          : {
              partialSuccess: {
                rejectedLogRecords: String(rejected),
                errorMessage: reasons.slice(0, MAX_REASONS).join('; '),
              },
            };
      sendOtlp(request, reply, 'response', response);
    },
  );

  /** Stores a write; says how many of its records were already stored (a retry's). */
  async function store(write: PlannedWrite): Promise<number> {
    if ('log' in write) {
      const { duplicate } = await ingest.appendLog(write.pipeline, write.runId, write.log);
      return duplicate ? write.records : 0;
    }
    const { duplicates } = await ingest.appendEvents(
      runKey(write.pipeline, write.runId),
      write.events,
    );
    return duplicates;
  }
}

/** An answer in the request's encoding: protobuf for protobuf, JSON for anything else. */
function sendOtlp(
  request: FastifyRequest,
  reply: FastifyReply,
  message: 'response' | 'status',
  value: object,
): void {
  const protobuf = (request.headers['content-type'] ?? '')
    .toLowerCase()
    .startsWith('application/x-protobuf');
  if (protobuf) {
    const bytes =
      message === 'status'
        ? encodeProtobufStatus(value as { code: number; message: string })
        : encodeProtobufResponse(value);
    void reply.type('application/x-protobuf').send(bytes);
  } else {
    void reply.type('application/json').send(JSON.stringify(value));
  }
}
