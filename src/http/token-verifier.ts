import { createHash, createPublicKey, createSecretKey } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createLocalJWKSet, errors, jwtVerify } from 'jose';
import type { JSONWebKeySet, JWTVerifyGetKey } from 'jose';
import { TailwaterError } from '../model/errors.js';
import type { Grants } from '../model/scopes.js';
import { GrantsError, parseGrants } from '../model/scopes.js';
import type { Settings } from '../model/settings.js';
import { SettingsError } from '../model/settings.js';

/** Who a verified token speaks for, and until when. */
export interface TokenHolder {
  grants: Grants;
  /** `sub`, for logs (never the token itself). */
  subject?: string | undefined;
  /** When the token stops being valid (ms since the epoch); open streams end then. */
  expiresAt?: number | undefined;
  /**
   * What per-token limits count it by: its `sub`, else a hash of the token (never the token
   * itself, which may not be kept).
   */
  key: string;
}

export type VerifyToken = (token: string) => Promise<TokenHolder>;

export type AuthSettings = Pick<
  Settings,
  'authSecret' | 'authPublicKeyFile' | 'authJwksFile' | 'authIssuer' | 'authAudience'
>;

/** A token's clocks may be this far from ours (exp, nbf, iat). */
const CLOCK_TOLERANCE_SECONDS = 30;
/** HS256 with a shorter secret can be guessed offline from any token it signed. */
const MIN_SECRET_BYTES = 32;
/** The longest token read: a header of a few KiB is refused before this anyway. */
const MAX_TOKEN_LENGTH = 8192;

/** Whether the settings turn authentication on. */
export function authEnabled(settings: AuthSettings): boolean {
  return (
    settings.authSecret !== '' || settings.authPublicKeyFile !== '' || settings.authJwksFile !== ''
  );
}

/**
 * The verifier the settings describe, with its keys read now (a missing or bad key file is an
 * error at start), or undefined when authentication is off. Only the algorithms of the
 * configured key are taken: `alg: none` and an HS256 token made with a public key as its secret
 * are refused.
 */
export function tokenVerifier(settings: AuthSettings): VerifyToken | undefined {
  const configured = [settings.authSecret, settings.authPublicKeyFile, settings.authJwksFile];
  if (configured.filter((value) => value !== '').length === 0) return undefined;
  if (configured.filter((value) => value !== '').length > 1) {
    throw new SettingsError(
      'auth: set one of authSecret, authPublicKeyFile and authJwksFile, not several.',
    );
  }
  const { key, algorithms } = keyOf(settings);
  const options = {
    algorithms,
    clockTolerance: CLOCK_TOLERANCE_SECONDS,
    ...(settings.authIssuer ? { issuer: settings.authIssuer } : {}),
    ...(settings.authAudience ? { audience: settings.authAudience } : {}),
  };
  const verified = new VerifiedTokens();
  return async (token) => {
    const known = verified.get(token, Date.now());
    if (known) return known;
    if (token.length === 0 || token.length > MAX_TOKEN_LENGTH) throw unauthenticated('malformed');
    let payload;
    try {
      // Two calls for jose's two overloads (a key, or a function that picks one by `kid`).
      ({ payload } =
        typeof key === 'function'
          ? await jwtVerify(token, key, options)
          : await jwtVerify(token, key, options));
    } catch (error) {
      throw unauthenticated(reasonOf(error));
    }
    let grants: Grants;
    try {
      grants = parseGrants(payload['tailwater']);
    } catch (error) {
      throw unauthenticated(error instanceof GrantsError ? error.message : 'malformed claims');
    }
    const subject = typeof payload.sub === 'string' ? payload.sub : undefined;
    const holder: TokenHolder = {
      grants,
      subject,
      expiresAt: typeof payload.exp === 'number' ? payload.exp * 1000 : undefined,
      key: subject !== undefined ? `sub:${subject}` : `token:${hashOf(token)}`,
    };
    verified.set(token, holder);
    return holder;
  };
}

/**
 * Tokens verified lately, by their text: a producer on a keep-alive connection sends the same
 * token with every append, and the text is the signature, so it need not be checked again until
 * it expires. Bounded, and a token past its exp (with the clock allowance) is never answered.
 */
class VerifiedTokens {
  private readonly holders = new Map<string, TokenHolder>();

  get(token: string, now: number): TokenHolder | undefined {
    const holder = this.holders.get(token);
    if (holder === undefined) return undefined;
    if (
      holder.expiresAt !== undefined &&
      now >= holder.expiresAt + CLOCK_TOLERANCE_SECONDS * 1000
    ) {
      this.holders.delete(token);
      return undefined;
    }
    return holder;
  }

  set(token: string, holder: TokenHolder): void {
    // Oldest first out, so many tokens (or a flood of valid ones) keep memory bounded.
    if (this.holders.size >= MAX_VERIFIED_TOKENS) {
      this.holders.delete(this.holders.keys().next().value!);
    }
    this.holders.set(token, holder);
  }
}

const MAX_VERIFIED_TOKENS = 10_000;

type Key = KeyObject | JWTVerifyGetKey;

function keyOf(settings: AuthSettings): { key: Key; algorithms: string[] } {
  if (settings.authSecret !== '') {
    const secret = new TextEncoder().encode(settings.authSecret);
    if (secret.length < MIN_SECRET_BYTES) {
      throw new SettingsError(
        `authSecret: must be at least ${MIN_SECRET_BYTES} bytes (a shorter HS256 secret can be guessed from any token it signed); try \`openssl rand -base64 48\`.`,
      );
    }
    // A KeyObject rather than the bytes: jose converts it once and keeps it, where raw bytes
    // are imported again for every token.
    return { key: createSecretKey(secret), algorithms: ['HS256'] };
  }
  if (settings.authPublicKeyFile !== '') {
    const file = settings.authPublicKeyFile;
    let key: KeyObject;
    try {
      key = createPublicKey(readFileSync(file, 'utf8'));
    } catch (error) {
      throw new SettingsError(
        `authPublicKeyFile: cannot read a PEM public key from ${file} (${messageOf(error)}).`,
      );
    }
    if (key.asymmetricKeyType === 'rsa') return { key, algorithms: ['RS256'] };
    if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') {
      return { key, algorithms: ['ES256'] };
    }
    throw new SettingsError(
      `authPublicKeyFile: ${file} holds neither an RSA key (RS256) nor a P-256 key (ES256).`,
    );
  }
  const file = settings.authJwksFile;
  let jwks: JSONWebKeySet;
  try {
    jwks = JSON.parse(readFileSync(file, 'utf8')) as JSONWebKeySet;
    if (!Array.isArray(jwks.keys) || jwks.keys.length === 0) throw new Error('no "keys"');
  } catch (error) {
    throw new SettingsError(`authJwksFile: cannot read a JWKS from ${file} (${messageOf(error)}).`);
  }
  return { key: createLocalJWKSet(jwks), algorithms: ['RS256', 'ES256'] };
}

/** Why a token was refused, in words that give nothing away beyond the reason's kind. */
function reasonOf(error: unknown): string {
  if (error instanceof errors.JWTExpired) return 'expired';
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'nbf') return 'not valid yet';
    return `its ${error.claim} claim is not accepted`;
  }
  if (error instanceof errors.JOSEAlgNotAllowed)
    return 'signed with an algorithm this server does not take';
  if (error instanceof errors.JWSSignatureVerificationFailed)
    return 'its signature does not verify';
  if (error instanceof errors.JWKSNoMatchingKey)
    return 'signed with a key this server does not know';
  return 'malformed';
}

function unauthenticated(reason: string): TailwaterError {
  return new TailwaterError('TW_UNAUTHENTICATED', `The token is not accepted: ${reason}.`, {
    'WWW-Authenticate': 'Bearer realm="tailwater"',
  });
}

function hashOf(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 32);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
