import { readFileSync } from 'node:fs';
import { z } from 'zod';

const KiB = 1024;
const MiB = 1024 * KiB;

const seconds = z.number().nonnegative().finite();
const positiveInt = z.number().int().positive();
const bytes = z.number().int().positive();

/**
 * Every setting with its default (ARCHITECTURE.md's table, plus the server's own). The names are
 * the config-file keys; the environment variable is TAILWATER_ + the name in upper snake case.
 */
export const settingsSchema = z.strictObject({
  // Server
  host: z.string().min(1).default('127.0.0.1'),
  port: z.number().int().min(0).max(65535).default(8585),
  data: z.string().min(1).default('./tailwater-data'),
  /** `sqlite:<path>`; empty means `sqlite:<data>/tailwater.db`. */
  store: z.string().default(''),
  bus: z.string().min(1).default('memory'),
  /** Keeps deployments sharing one Redis apart: channels are `tailwater:<busNamespace>:…`. */
  busNamespace: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1 to 64 letters, digits, "_", "." or "-"')
    .default('default'),
  insecure: z.boolean().default(false),
  /**
   * Authentication (docs/SECURITY.md): JWTs signed with this HS256 secret (32 bytes at least),
   * or verified with the public key in authPublicKeyFile (PEM, RS256 or ES256) or the keys of
   * authJwksFile (a JWKS, picked by `kid`). None set: no authentication, loopback only.
   */
  authSecret: z.string().default(''),
  authPublicKeyFile: z.string().default(''),
  authJwksFile: z.string().default(''),
  /** When set, a token's `iss` / `aud` must be this. */
  authIssuer: z.string().default(''),
  authAudience: z.string().default(''),
  /**
   * A fixed bearer token that may read /metrics and nothing else (16 characters at least), for
   * a Prometheus scrape job's `authorization.credentials_file`; admin tokens may read it too.
   */
  metricsToken: z
    .string()
    .refine((value) => value === '' || value.length >= 16, 'must be 16 characters at least')
    .default(''),
  /** TLS: the PEM certificate (chain) and private key files; both, or neither (plain HTTP). */
  tlsCert: z.string().default(''),
  tlsKey: z.string().default(''),
  /** Writes one token may make per minute (0: no limit); only with authentication on. */
  appendsPerMinutePerToken: z.number().int().nonnegative().default(0),
  /** Failed authentications one client address may make per minute before it gets 429. */
  authFailuresPerMinute: positiveInt.default(30),
  demo: z.boolean().default(false),
  /** How long each of the demo pipeline's runs lasts. */
  demoRunSeconds: positiveInt.max(86_400).default(60),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * SQLite's synchronous mode under WAL. `normal` makes a commit durable against a crash of the
   * process (the WAL frames are in the OS before the commit returns); `full` adds an fsync per
   * commit, for durability against power loss, at a large cost in appends per second.
   */
  sqliteSynchronous: z.enum(['normal', 'full']).default('normal'),

  // Defences that hold without authentication (docs/SECURITY.md)
  /**
   * How long a client has to send a whole request, headers and body; past it the server
   * answers 408 and closes. Open streams are not requests being received: it does not apply.
   */
  requestTimeoutSeconds: seconds.positive().default(30),
  /** How long an idle keep-alive connection is kept open between requests. */
  keepAliveTimeoutSeconds: seconds.positive().default(72),
  /**
   * Bytes of request bodies the server holds at once, being read or being stored: a body that
   * would take more is refused (503, Retry-After), so many large batches at once cannot exhaust
   * memory. At least one largest batch (about 67 MB) must fit.
   */
  maxBodyBytesInFlight: bytes.default(256 * MiB),
  /** Open connections one client (a remote address) may hold, streams and idle ones included. */
  maxConnectionsPerClient: positiveInt.default(256),
  /** Open streams one client may hold, so that no one client takes every stream slot. */
  maxStreamsPerClient: positiveInt.default(100),
  /** Open streams one token may hold (with authentication on), from any number of addresses. */
  maxStreamsPerToken: positiveInt.default(100),
  /**
   * Proxies (addresses, CIDR ranges, `loopback`…, comma-separated) whose `X-Forwarded-For` names
   * the client, for the per-client limits behind nginx. Empty: the socket's address is the client.
   */
  trustProxy: z.string().default(''),
  /**
   * Host names the server answers to besides loopback names and the address it listens on
   * (`tailwater.example.com`, or `.example.com` for it and its subdomains); any other Host is
   * 421, which defeats DNS rebinding. Listening on a wildcard address with none set, any Host is
   * taken.
   */
  allowedHosts: z.array(z.string().min(1)).default([]),
  /**
   * Origins other than the server's own whose pages may call the API (CORS): exact origins,
   * `scheme://host:*` for any port, or `*`. A request from any other origin is 403. Unset: pages
   * on other loopback ports without authentication, none with it (docs/SECURITY.md).
   */
  allowedOrigins: z.array(z.string().min(1)).optional(),

  /**
   * How often the search indexer looks for entries to index once it has caught up (it runs
   * without pause while any are waiting); docs/SEARCH.md.
   */
  searchIndexSeconds: seconds.positive().default(0.5),

  // Sealed history (docs/STORAGE.md, "Sealed segments")
  /**
   * Where sealed segments are kept: `dir:<path>` (default: `segments` under the data
   * directory), `s3://bucket/prefix` (S3 or any S3-compatible storage), or `off` to keep every
   * run in the hot store. On PostgreSQL every replica must reach the same segments: S3.
   */
  segments: z.string().default(''),
  /** An S3-compatible server's URL (MinIO, Ceph, R2…); empty: AWS S3 itself. */
  s3Endpoint: z.string().default(''),
  s3Region: z.string().default('us-east-1'),
  /** How long after a run ends it is sealed (late appends and viewers of its end read it hot). */
  sealAfterSeconds: seconds.default(60),
  /**
   * How long after a segment is recorded the hot rows it replaces are removed: longer than any
   * replica caches what is sealed (1 s), so none ever reads a removed row.
   */
  sealGraceSeconds: seconds.min(2).default(30),
  /** zstd level of sealed blocks (1–19): 9 is about 0.08 × the text of typical logs. */
  sealLevel: z.number().int().min(1).max(19).default(9),

  // Streaming engine
  heartbeatSeconds: seconds.positive().default(25),
  pollSeconds: seconds.positive().default(2),
  readBatchEntries: positiveInt.default(1000),
  maxBytesPerTick: bytes.default(1 * MiB),
  maxStreamBytes: bytes.default(32 * MiB),
  maxStreamSeconds: seconds.positive().default(3600),
  maxIdleSeconds: seconds.positive().default(300),
  finishGraceSeconds: seconds.default(10),
  unknownRunGraceSeconds: seconds.default(60),
  runStatePollSeconds: seconds.positive().default(10),
  replayBufferBytes: z
    .number()
    .int()
    .nonnegative()
    .default(256 * KiB),
  maxPendingBytesPerViewer: bytes.default(4 * MiB),
  maxActiveStreams: positiveInt.default(200),
  maxActiveConnections: positiveInt.default(500),
  maxSubscribersPerStream: positiveInt.default(100),
  tailerIdleGraceSeconds: seconds.default(30),
  /** The `retry:` hint sent to SSE clients at the start of each stream. */
  retryMillis: z.number().int().nonnegative().default(2000),

  // Retention of topics (runs are kept; their streams end)
  /** Entries kept per topic; 0 keeps every entry. */
  topicMaxEntries: z.number().int().nonnegative().default(1_000_000),
  /** Age after which a topic's entries are removed; 0 keeps them forever. */
  topicMaxAgeSeconds: z.number().nonnegative().finite().default(0),
  retentionIntervalSeconds: seconds.positive().default(60),
  /** Per-topic overrides, e.g. {"iceberg": {"maxEntries": 100000, "maxAgeSeconds": 604800}}. */
  retention: z
    .record(
      z.string(),
      z.strictObject({
        maxEntries: z.number().int().nonnegative().optional(),
        maxAgeSeconds: z.number().nonnegative().finite().optional(),
      }),
    )
    .default({}),
  /**
   * Runs kept, by pipeline glob: the first rule whose `pipeline` matches a pipeline applies,
   * e.g. [{"pipeline": "ci.*", "maxAgeDays": 30}, {"pipeline": "*", "maxRuns": 1000}]. A run
   * still going is never removed. None: every run is kept (docs/SEARCH.md, "History").
   */
  runRetention: z
    .array(
      z
        .strictObject({
          pipeline: z.string().min(1).max(256),
          /** Keep this many newest runs of the pipeline. */
          maxRuns: z.number().int().positive().optional(),
          /** Remove runs that ended more than this many days ago. */
          maxAgeDays: z.number().positive().finite().optional(),
        })
        .refine(
          (rule) => rule.maxRuns !== undefined || rule.maxAgeDays !== undefined,
          'a rule needs maxRuns, maxAgeDays or both',
        ),
    )
    .max(100)
    .default([]),

  // Appending
  maxEventBytes: bytes.default(64 * KiB),
  maxBatchEntries: positiveInt.default(1000),
  /** The largest log append accepted in one request; it is stored as chunks of ≤ maxEventBytes. */
  maxAppendBytes: bytes.default(8 * MiB),

  // Dialects for the seed systems' clients
  /** The pipeline that ZenML runs are filed under when a ZenML client names an unknown run. */
  zenmlPipeline: z.string().min(1).max(256).default('zenml'),
  /** The topic and kind the Iceberg dashboard dialect serves. */
  icebergTopic: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,128}$/)
    .default('iceberg'),
  icebergKind: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/)
    .default('iceberg-mutation'),
  /** Recent events a new Iceberg dashboard is sent on connect (the seed kept no history). */
  icebergReplayOnConnect: z.number().int().nonnegative().default(50),

  // Producers
  runnerChunkBytes: bytes.default(4096),
  runnerFlushSeconds: seconds.positive().default(3),
  runnerTimeoutSeconds: seconds.positive().default(3600),
  runnerReadTimeoutSeconds: seconds.positive().default(300),
  /** How long a stopped command's processes have after SIGTERM before SIGKILL (Freight's 10). */
  runnerKillGraceSeconds: seconds.positive().default(10),
  publisherQueue: positiveInt.default(4096),
  publisherBatch: positiveInt.default(64),
});

export type Settings = z.infer<typeof settingsSchema>;
export type SettingName = keyof Settings;
export type PartialSettings = Partial<Settings>;

export class SettingsError extends Error {
  override name = 'SettingsError';
}

const shape = settingsSchema.shape;

export function defaultSettings(): Settings {
  return settingsSchema.parse({});
}

/** `finishGraceSeconds` → `TAILWATER_FINISH_GRACE_SECONDS`. */
export function envName(name: string): string {
  return `TAILWATER_${name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()}`;
}

function baseType(name: SettingName): 'number' | 'boolean' | 'string' | 'object' {
  const defaultValue = settingsSchema.parse({})[name];
  return typeof defaultValue === 'number'
    ? 'number'
    : typeof defaultValue === 'boolean'
      ? 'boolean'
      : typeof defaultValue === 'string'
        ? 'string'
        : 'object';
}

function describeIssues(source: string, error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const key = issue.path.join('.');
      return `${source}${key ? `: ${key}` : ''}: ${issue.message}`;
    })
    .join('\n');
}

function validateLayer(source: string, layer: Record<string, unknown>): PartialSettings {
  const result = settingsSchema.partial().safeParse(layer);
  if (!result.success) throw new SettingsError(describeIssues(source, result.error));
  // zod fills defaults even in a partial schema; keep only what this layer actually set.
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(layer)) out[key] = (result.data as Record<string, unknown>)[key];
  return out as PartialSettings;
}

/** Reads a JSON config file whose keys are setting names. */
export function readConfigFile(path: string): PartialSettings {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new SettingsError(`config file ${path}: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new SettingsError(`config file ${path}: expected a JSON object of settings`);
  }
  // Sections handled elsewhere (e.g. `sources`) are not settings of this table.
  const { sources: _sources, ...rest } = parsed as Record<string, unknown>;
  return validateLayer(`config file ${path}`, rest);
}

/** Reads every TAILWATER_* variable that names a setting; each is validated on its own. */
export function readEnv(env: NodeJS.ProcessEnv): PartialSettings {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(shape) as SettingName[]) {
    const variable = envName(name);
    const raw = env[variable];
    if (raw === undefined || raw === '') continue;
    let value: unknown = raw;
    const type = baseType(name);
    if (type === 'object') {
      try {
        value = JSON.parse(raw);
      } catch {
        throw new SettingsError(`${variable}: expected JSON, got "${raw}"`);
      }
    } else if (type === 'number') {
      value = Number(raw.trim());
      if (raw.trim() === '' || Number.isNaN(value)) {
        throw new SettingsError(`${variable}: expected a number, got "${raw}"`);
      }
    } else if (type === 'boolean') {
      if (!/^(true|false|1|0)$/i.test(raw.trim())) {
        throw new SettingsError(`${variable}: expected true or false, got "${raw}"`);
      }
      value = /^(true|1)$/i.test(raw.trim());
    }
    Object.assign(out, validateLayer(variable, { [name]: value }));
  }
  return out;
}

export interface SettingsSources {
  configFile?: string | undefined;
  env?: NodeJS.ProcessEnv;
  flags?: PartialSettings;
}

/** defaults ← config file ← TAILWATER_* env ← flags, each layer validated with its source named. */
export function loadSettings(sources: SettingsSources = {}): Settings {
  const env = sources.env ?? process.env;
  const configFile = sources.configFile ?? env['TAILWATER_CONFIG'];
  const fromFile = configFile ? readConfigFile(configFile) : {};
  const fromEnv = readEnv(env);
  const fromFlags = validateLayer('flag', stripUndefined(sources.flags ?? {}));
  return settingsSchema.parse({ ...fromFile, ...fromEnv, ...fromFlags });
}

function stripUndefined(layer: PartialSettings): Record<string, unknown> {
  return Object.fromEntries(Object.entries(layer).filter(([, value]) => value !== undefined));
}
