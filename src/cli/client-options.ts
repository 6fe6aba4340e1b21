import { InvalidArgumentError, Option } from 'commander';
import type { Command } from 'commander';
import { TailwaterClient } from '../client/http-client.js';
import { TailwaterError } from '../model/errors.js';
import { readSecretFile, SecretFileError } from '../model/secret-file.js';

/** A bad argument the user can fix: printed as one line, exit status 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export interface ClientFlags {
  server: string;
  token?: string | undefined;
  tokenFile?: string | undefined;
}

export const DEFAULT_SERVER = 'http://127.0.0.1:8585';

/** `--server` and `--token`, which every command that talks to a server takes. */
export function addClientOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--server <url>', 'the Tailwater server')
        .env('TAILWATER_SERVER')
        .default(DEFAULT_SERVER),
    )
    .addOption(new Option('--token <token>', 'bearer token to send').env('TAILWATER_TOKEN'))
    .addOption(
      new Option(
        '--token-file <file>',
        'read the token from this file (keeps it off the command line)',
      ).env('TAILWATER_TOKEN_FILE'),
    );
}

/**
 * The token to send: `--token` (or TAILWATER_TOKEN), else the first line of `--token-file` (or
 * TAILWATER_TOKEN_FILE). An unreadable or empty file is a usage error, never sent as nothing.
 */
export function tokenOf(flags: ClientFlags): string | undefined {
  if (flags.token) return flags.token;
  if (!flags.tokenFile) return undefined;
  try {
    return readSecretFile(flags.tokenFile);
  } catch (error) {
    if (error instanceof SecretFileError) throw new UsageError(`--token-file: ${error.message}`);
    throw error;
  }
}

/** The server URL, checked, without a trailing slash. */
export function serverUrl(flags: ClientFlags): string {
  let url: URL;
  try {
    url = new URL(flags.server);
  } catch {
    throw new UsageError(`--server: "${flags.server}" is not a URL (e.g. ${DEFAULT_SERVER}).`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`--server: "${flags.server}" must be an http:// or https:// URL.`);
  }
  return flags.server.replace(/\/+$/, '');
}

export function clientFrom(flags: ClientFlags): TailwaterClient {
  return new TailwaterClient({ server: serverUrl(flags), token: tokenOf(flags) });
}

/** Runs a validator from the model (which throws TailwaterError) as an argument check. */
export function checkArgument<T>(what: string, validate: () => T): T {
  try {
    return validate();
  } catch (error) {
    if (error instanceof TailwaterError) throw new UsageError(`${what}: ${error.message}`);
    throw error;
  }
}

/** Commander parser for a whole number in [min, max]. */
export function integerIn(min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}.`);
    }
    return n;
  };
}

const KIND_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/** Commander parser for `--kinds a,b,c`. */
export function kindList(value: string): string[] {
  const kinds = value
    .split(',')
    .map((kind) => kind.trim())
    .filter((kind) => kind.length > 0);
  if (kinds.length === 0) throw new InvalidArgumentError('expected one or more kinds.');
  const bad = kinds.find((kind) => !KIND_RE.test(kind));
  if (bad !== undefined) {
    throw new InvalidArgumentError(`"${bad}" is not a kind ([A-Za-z0-9_.:-]{1,64}).`);
  }
  return kinds;
}
