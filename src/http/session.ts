import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { TailwaterError } from '../model/errors.js';
import { TOKEN_COOKIE } from './auth.js';
import { errors, json, noContent, session } from './schemas/api.js';
import type { VerifyToken } from './token-verifier.js';

const signIn = z.strictObject({ token: z.string().min(1).max(8192) });

const signedOut = noContent('The session cookie is cleared.');

/**
 * The dashboard's sign-in (docs/SECURITY.md, "The dashboard"): a token pasted once is checked
 * and kept in an HttpOnly, SameSite=Strict cookie, so the page's script never holds it and no
 * other site's page can send it. `GET` says who is signed in, `DELETE` signs out.
 */
export async function sessionRoutes(
  app: FastifyInstance,
  options: { verify: VerifyToken | undefined },
): Promise<void> {
  const { verify } = options;

  const whoAmI = {
    summary: 'Who is signed in',
    tags: ['session'],
    response: {
      200: json('The token of this request, or that there is no authentication.', session),
    },
  };
  app.get('/api/v1/session', { schema: whoAmI }, async (request) => {
    if (!verify) return { authentication: false };
    const holder = request.tokenHolder!;
    return {
      authentication: true,
      subject: holder.subject ?? null,
      expiresAt: holder.expiresAt === undefined ? null : new Date(holder.expiresAt).toISOString(),
      grants: holder.grants,
    };
  });

  const signInSchema = {
    summary: 'Sign the dashboard in: the token goes into an HttpOnly cookie',
    tags: ['session'],
    body: signIn,
    response: {
      204: noContent('Signed in: `Set-Cookie: tailwater_token=…`.'),
      ...errors(400, 401, 404, 415),
    },
  };
  app.post(
    '/api/v1/session',
    { bodyLimit: 16 * 1024, schema: signInSchema },
    async (request, reply) => {
      if (!verify) {
        throw new TailwaterError(
          'TW_NOT_FOUND',
          'This server has no authentication to sign in to.',
        );
      }
      const parsed = signIn.safeParse(request.body);
      if (!parsed.success) {
        throw new TailwaterError('TW_BAD_REQUEST', 'The body must be {"token": "<token>"}.');
      }
      const holder = await verify(parsed.data.token);
      // Verifying allows for clocks; a session does not start on a token already past its exp.
      if (holder.expiresAt !== undefined && holder.expiresAt <= Date.now()) {
        throw new TailwaterError('TW_UNAUTHENTICATED', 'The token is not accepted: expired.', {
          'WWW-Authenticate': 'Bearer realm="tailwater"',
        });
      }
      const maxAge =
        holder.expiresAt === undefined
          ? undefined
          : Math.max(0, Math.floor((holder.expiresAt - Date.now()) / 1000));
      reply.header('set-cookie', cookie(parsed.data.token, maxAge));
      return reply.code(204).send();
    },
  );

  const signOut = { summary: 'Sign out', tags: ['session'], response: { 204: signedOut } };
  app.delete('/api/v1/session', { schema: signOut }, async (_request, reply) => {
    reply.header('set-cookie', cookie('', 0));
    return reply.code(204).send();
  });
}

function cookie(value: string, maxAge: number | undefined): string {
  return [
    `${TOKEN_COOKIE}=${value}`,
    'Path=/',
    'HttpOnly',
    'SameSite=Strict',
    ...(maxAge === undefined ? [] : [`Max-Age=${maxAge}`]),
  ].join('; ');
}
