import { TailwaterClient, TailwaterClientError } from '../../src/client/index.js';

/** `GET /api/v1/session`: whether the server checks tokens, and whose token the cookie holds. */
export type SessionInfo =
  | { authentication: false }
  | {
      authentication: true;
      subject: string | null;
      /** ISO time, or null for a token without `exp`. */
      expiresAt: string | null;
    };

/**
 * The sign-in endpoints (docs/SECURITY.md, "The dashboard"). The token goes to the server once
 * and comes back as an HttpOnly cookie, so this page's script never holds it afterwards. Every
 * call throws a TailwaterClientError (status 401 for a refused or missing token).
 */
export interface SessionApi {
  /** Who is signed in; 401 with authentication on and no valid cookie. */
  check(): Promise<SessionInfo>;
  /** `POST {"token"}`: 204 and the cookie, or 401 with the server's reason. */
  signIn(token: string): Promise<void>;
  /** `DELETE`: the cookie is cleared. */
  signOut(): Promise<void>;
}

const SESSION_PATH = '/api/v1/session';

/** The session endpoints of the server that served the page (the cookie goes with each call). */
export function serverSession(server = window.location.origin): SessionApi {
  // No token of its own: the browser sends the cookie.
  const client = new TailwaterClient({ server, token: '' });
  return {
    async check() {
      const answer = await client.request<Partial<SessionInfo> & { subject?: unknown }>(
        'GET',
        SESSION_PATH,
      );
      if (answer?.authentication !== true) return { authentication: false };
      return {
        authentication: true,
        subject: typeof answer.subject === 'string' ? answer.subject : null,
        expiresAt: typeof answer.expiresAt === 'string' ? answer.expiresAt : null,
      };
    },
    async signIn(token) {
      await client.request('POST', SESSION_PATH, { token });
    },
    async signOut() {
      await client.request('DELETE', SESSION_PATH);
    },
  };
}

/** The HTTP status of a refusal from the server (0: not reached), or undefined for any other error. */
export function statusOf(error: unknown): number | undefined {
  return error instanceof TailwaterClientError ? error.status : undefined;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
