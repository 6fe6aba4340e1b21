/**
 * Every error Tailwater reports has a code from this table. The HTTP layer maps the code to
 * its status in one place, so a handler never picks a status by hand (Fastify's FST_ERR_* idea).
 */
export const ERROR_STATUS = {
  TW_BAD_JSON: 400,
  TW_BAD_UTF8: 400,
  TW_BAD_REQUEST: 400,
  TW_BAD_NAME: 400,
  TW_BAD_CURSOR: 400,
  TW_BAD_QUERY: 400,
  TW_RESERVED_KIND: 400,
  /** No token, or one that is malformed, forged, expired or not yet valid (docs/SECURITY.md). */
  TW_UNAUTHENTICATED: 401,
  /** A valid token without the scope the request needs. */
  TW_FORBIDDEN: 403,
  /** The request's Origin is not the server's own nor an allowed one (cross-site requests). */
  TW_FORBIDDEN_ORIGIN: 403,
  TW_NOT_FOUND: 404,
  TW_PIPELINE_NOT_FOUND: 404,
  TW_RUN_NOT_FOUND: 404,
  /** The request did not arrive whole within requestTimeoutSeconds. */
  TW_REQUEST_TIMEOUT: 408,
  TW_STATUS_CONFLICT: 409,
  /** A producer id already names something else on this stream. */
  TW_ID_CONFLICT: 409,
  /** A run named without its pipeline (ZenML, Freight) that more than one pipeline has. */
  TW_AMBIGUOUS_RUN: 409,
  TW_EVENT_TOO_LARGE: 413,
  TW_META_TOO_LARGE: 413,
  /** The ZenML dialect's answer to a batch it cannot take (FastAPI's validation status). */
  TW_UNPROCESSABLE: 422,
  TW_BATCH_TOO_LARGE: 413,
  TW_BODY_TOO_LARGE: 413,
  TW_UNSUPPORTED_MEDIA_TYPE: 415,
  /** A `log.txt` range that starts at or past the end of the log. */
  TW_RANGE_NOT_SATISFIABLE: 416,
  /** The Host header names neither this server nor one of its configured names (DNS rebinding). */
  TW_MISDIRECTED: 421,
  TW_HEADERS_TOO_LARGE: 431,
  /** One client (a remote address) holds as many connections or streams as it may. */
  TW_TOO_MANY_CLIENT_CONNECTIONS: 429,
  TW_TOO_MANY_CLIENT_STREAMS: 429,
  /** One token made appendsPerMinutePerToken writes this minute. */
  TW_TOO_MANY_APPENDS: 429,
  /** One client address failed to authenticate authFailuresPerMinute times this minute. */
  TW_TOO_MANY_AUTH_FAILURES: 429,
  TW_TOO_MANY_CONNECTIONS: 503,
  TW_TOO_MANY_STREAMS: 503,
  TW_TOO_MANY_SUBSCRIBERS: 503,
  TW_SHUTTING_DOWN: 503,
  /** The server holds as much request data at once as maxBodyBytesInFlight allows. */
  TW_SERVER_BUSY: 503,
  TW_STORE_UNAVAILABLE: 503,
  /** A sealed segment that is missing or fails its checksum: its text is never guessed. */
  TW_SEGMENT_UNREADABLE: 500,
  TW_INTERNAL: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** The one error type of Tailwater: a code from ERROR_STATUS, a message for people. */
export class TailwaterError extends Error {
  readonly code: ErrorCode;
  /** Extra response headers, e.g. Retry-After for capacity refusals. */
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'TailwaterError';
    this.code = code;
    this.headers = headers;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}
