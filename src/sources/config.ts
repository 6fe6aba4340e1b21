import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { readSecretFile, SecretFileError } from '../model/secret-file.js';
import { SettingsError } from '../model/settings.js';

/** A STOMP subscription (ActiveMQ) whose messages become events of a topic. */
export const stompSourceSchema = z.strictObject({
  type: z.literal('stomp'),
  /** A name for logs, /readyz and the durable subscription (default: the topic). */
  name: z.string().min(1).optional(),
  host: z.string().min(1).default('127.0.0.1'),
  port: z.number().int().min(1).max(65535).default(61613),
  login: z.string().default('admin'),
  passcode: z.string().default('admin'),
  /** A file whose first line is the passcode (a secrets mount), instead of `passcode`. */
  passcodeFile: z.string().min(1).optional(),
  /** The STOMP virtual host header. */
  vhost: z.string().default('/'),
  destination: z.string().min(1).default('/topic/ICEBERG_METADATA_EVENTS'),
  topic: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,128}$/)
    .default('iceberg'),
  kind: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/)
    .default('iceberg-mutation'),
  /** The field of each message's JSON that identifies it (the producer id). */
  idField: z.string().min(1).default('eventId'),
  /** A durable topic subscription: messages sent while Tailwater is down wait for it. */
  durable: z.boolean().default(true),
  /**
   * The STOMP client-id the durable subscription belongs to. Default: `tailwater-<name>` on a
   * shared (PostgreSQL) store, so whichever replica holds the source's lease takes over the same
   * subscription; `tailwater-<name>-<hostname>` on SQLite, as before.
   */
  clientId: z.string().min(1).max(256).optional(),
  heartbeatMs: z.number().int().nonnegative().default(10_000),
});

export type StompSourceConfig = z.infer<typeof stompSourceSchema>;
export type SourceConfig = StompSourceConfig;

const sourcesSchema = z.array(z.discriminatedUnion('type', [stompSourceSchema]));

function parseSources(where: string, value: unknown): SourceConfig[] {
  const result = sourcesSchema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new SettingsError(`${where}: sources.${issue.path.join('.')}: ${issue.message}`);
}

/**
 * The `sources` of the config file, or of TAILWATER_SOURCES (JSON) which replaces them.
 * TAILWATER_STOMP_LOGIN and TAILWATER_STOMP_PASSCODE (or TAILWATER_STOMP_PASSCODE_FILE) override
 * the credentials of every STOMP source, so they need not sit in the config file; a source's
 * `passcodeFile` is read here, at start.
 */
export function loadSources(
  configFile: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): SourceConfig[] {
  let sources: SourceConfig[] = [];
  const file = configFile ?? env['TAILWATER_CONFIG'];
  if (file) {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as { sources?: unknown };
    if (parsed.sources !== undefined) sources = parseSources(`config file ${file}`, parsed.sources);
  }
  const fromEnv = env['TAILWATER_SOURCES'];
  if (fromEnv) {
    let value: unknown;
    try {
      value = JSON.parse(fromEnv);
    } catch {
      throw new SettingsError(`TAILWATER_SOURCES: expected a JSON array of sources`);
    }
    sources = parseSources('TAILWATER_SOURCES', value);
  }
  const passcodeFile = env['TAILWATER_STOMP_PASSCODE_FILE'];
  return sources.map(({ passcodeFile: ownFile, ...source }) => ({
    ...source,
    login: env['TAILWATER_STOMP_LOGIN'] ?? source.login,
    passcode:
      env['TAILWATER_STOMP_PASSCODE'] ??
      passcodeFrom('TAILWATER_STOMP_PASSCODE_FILE', passcodeFile) ??
      passcodeFrom(`sources: ${source.name ?? source.topic}: passcodeFile`, ownFile) ??
      source.passcode,
  }));
}

function passcodeFrom(where: string, file: string | undefined): string | undefined {
  if (!file) return undefined;
  try {
    return readSecretFile(file);
  } catch (error) {
    if (error instanceof SecretFileError) throw new SettingsError(`${where}: ${error.message}`);
    throw error;
  }
}
