import type { StreamKey } from './stream-key.js';

/**
 * What a token allows (docs/SECURITY.md, "Tokens and scopes"): the `tailwater` claim of a JWT,
 * `{"read": [patterns], "write": [patterns], "admin": bool}`. A pattern is a glob over a
 * resource name, `pipeline:<fqn>` or `topic:<name>`, where `*` stands for any run of
 * characters (dots and colons included): `pipeline:ingest.*`, `topic:iceberg`, `*`. An admin
 * may do everything.
 */
export interface Grants {
  readonly read: readonly string[];
  readonly write: readonly string[];
  readonly admin: boolean;
}

export type Action = 'read' | 'write' | 'admin';

/** The most patterns one list may hold, and the longest pattern: a token is read per request. */
const MAX_PATTERNS = 256;
const MAX_PATTERN_LENGTH = 512;

/** Why a claim is not one this server reads; the message names the part. */
export class GrantsError extends Error {}

/** Reads the `tailwater` claim; absent, it grants nothing. */
export function parseGrants(claim: unknown): Grants {
  if (claim === undefined) return { read: [], write: [], admin: false };
  if (typeof claim !== 'object' || claim === null || Array.isArray(claim)) {
    throw new GrantsError('the tailwater claim must be an object');
  }
  const { read, write, admin, ...rest } = claim as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) {
    throw new GrantsError(`the tailwater claim has unknown fields: ${unknown.join(', ')}`);
  }
  if (admin !== undefined && typeof admin !== 'boolean') {
    throw new GrantsError('tailwater.admin must be true or false');
  }
  return { read: patterns('read', read), write: patterns('write', write), admin: admin === true };
}

function patterns(name: string, value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > MAX_PATTERNS) {
    throw new GrantsError(`tailwater.${name} must be a list of at most ${MAX_PATTERNS} patterns`);
  }
  for (const pattern of value) {
    if (
      typeof pattern !== 'string' ||
      pattern.length === 0 ||
      pattern.length > MAX_PATTERN_LENGTH
    ) {
      throw new GrantsError(
        `tailwater.${name} holds a pattern that is not a string of 1 to ${MAX_PATTERN_LENGTH} characters`,
      );
    }
  }
  return value as string[];
}

/** The resource name a stream is granted by: `pipeline:<fqn>` for a run, `topic:<name>`. */
export function resourceOf(key: StreamKey): string {
  return key.type === 'run' ? pipelineResource(key.pipeline) : topicResource(key.topic);
}

export const pipelineResource = (fqn: string): string => `pipeline:${fqn}`;
export const topicResource = (topic: string): string => `topic:${topic}`;

/** Whether `grants` allow `action` on `resource`. Writing does not imply reading. */
export function allows(grants: Grants, action: Action, resource: string): boolean {
  if (grants.admin) return true;
  if (action === 'admin') return false;
  return (action === 'read' ? grants.read : grants.write).some((pattern) =>
    globMatches(pattern, resource),
  );
}

/**
 * `*` is any run of characters; everything else is itself. A two-pointer match that goes back
 * only to the last `*`, so no pattern a token carries can make it slow (at most length × length
 * steps, where a regular expression could backtrack for ever).
 */
export function globMatches(pattern: string, name: string): boolean {
  let p = 0;
  let n = 0;
  let star = -1;
  let resume = 0;
  while (n < name.length) {
    if (p < pattern.length && pattern[p] === '*') {
      star = p;
      p += 1;
      resume = n;
    } else if (p < pattern.length && pattern[p] === name[n]) {
      p += 1;
      n += 1;
    } else if (star !== -1) {
      p = star + 1;
      resume += 1;
      n = resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === '*') p += 1;
  return p === pattern.length;
}
