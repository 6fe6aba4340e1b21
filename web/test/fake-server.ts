import { vi } from 'vitest';

/**
 * A stand-in for the server's HTTP API at the fetch() boundary, for the views' REST calls and
 * the sign-in endpoints (src/http/session.ts): `POST /api/v1/session` takes a known token and
 * "sets the cookie", `GET` answers who holds it (401 without one), `DELETE` clears it. Other
 * paths answer what `routes` says, else 404. Installed over the global fetch; `restore()` puts
 * it back.
 */
export interface FakeServer {
  /** Every request, in order: method, path (with query), JSON body, and the cookie it carried. */
  requests: { method: string; path: string; body: unknown; cookie: string | null }[];
  /** The token the browser's cookie holds, or null. */
  cookie: string | null;
  /** Tokens the server takes, with their subject (null: none). */
  tokens: Map<string, string | null>;
  /**
   * Tokens the server takes at sign-in but with a cookie of Max-Age=0 (past their exp, within
   * the clock allowance): the browser drops the cookie at once.
   */
  lapsed: Set<string>;
  /** Answers for other paths: `"GET /api/v1/…"` → status and JSON body (or a function of them). */
  routes: Map<string, (cookie: string | null) => { status: number; body?: unknown }>;
  /** The token stops being taken (it expired): `GET /api/v1/session` now answers 401. */
  expire(token: string): void;
  restore(): void;
}

const unauthenticated = (message: string) => ({
  status: 401,
  body: { error: { code: 'TW_UNAUTHENTICATED', message } },
});

export function fakeServer({ authentication }: { authentication: boolean }): FakeServer {
  const server: FakeServer = {
    requests: [],
    cookie: null,
    tokens: new Map(),
    lapsed: new Set(),
    routes: new Map(),
    expire(token) {
      server.tokens.delete(token);
    },
    restore() {
      vi.unstubAllGlobals();
    },
  };

  const answer = (method: string, path: string, body: unknown) => {
    if (path === '/api/v1/session') {
      if (!authentication) {
        if (method === 'GET') return { status: 200, body: { authentication: false } };
        return { status: 404, body: { error: { code: 'TW_NOT_FOUND', message: 'No auth.' } } };
      }
      if (method === 'POST') {
        const token = (body as { token?: unknown } | undefined)?.token;
        if (typeof token === 'string' && server.lapsed.has(token)) {
          server.cookie = null;
          return { status: 204 };
        }
        if (typeof token !== 'string' || !server.tokens.has(token)) {
          return unauthenticated('The token is not accepted: its signature does not verify.');
        }
        server.cookie = token;
        return { status: 204 };
      }
      if (method === 'DELETE') {
        server.cookie = null;
        return { status: 204 };
      }
      if (server.cookie === null) {
        return unauthenticated('This server needs a token: send "Authorization: Bearer <token>".');
      }
      if (!server.tokens.has(server.cookie)) {
        return unauthenticated('The token is not accepted: expired.');
      }
      return {
        status: 200,
        body: {
          authentication: true,
          subject: server.tokens.get(server.cookie) ?? null,
          expiresAt: '2030-01-01T00:00:00.000Z',
          grants: { read: ['*'], write: [], admin: false },
        },
      };
    }
    const route = server.routes.get(`${method} ${path}`);
    if (route) return route(server.cookie);
    return { status: 404, body: { error: { code: 'TW_NOT_FOUND', message: `No ${path}.` } } };
  };

  vi.stubGlobal('fetch', async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const method = (init.method ?? 'GET').toUpperCase();
    const body = typeof init.body === 'string' ? (JSON.parse(init.body) as unknown) : undefined;
    const path = url.pathname + url.search;
    server.requests.push({ method, path, body, cookie: server.cookie });
    const { status, body: answerBody } = answer(method, path, body);
    return new Response(answerBody === undefined ? null : JSON.stringify(answerBody), {
      status,
      headers: answerBody === undefined ? {} : { 'content-type': 'application/json' },
    });
  });
  return server;
}
