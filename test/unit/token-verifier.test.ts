import { SignJWT } from 'jose';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { tokenVerifier } from '../../src/http/token-verifier.js';

// The verifier keeps tokens it verified, by their text, until they expire (docs/SECURITY.md):
// a producer sending one token with every append pays for one verification.

const SECRET = 'a-test-secret-of-more-than-thirty-two-bytes';
const settings = {
  authSecret: SECRET,
  authPublicKeyFile: '',
  authJwksFile: '',
  authIssuer: '',
  authAudience: '',
};

afterEach(() => {
  vi.useRealTimers();
});

const sign = (expiresAt: number) =>
  new SignJWT({ tailwater: { read: ['*'] } })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime(expiresAt)
    .sign(new TextEncoder().encode(SECRET));

describe('tokenVerifier', () => {
  it('answers a token it verified before with the same holder, without verifying it again', async () => {
    const verify = tokenVerifier(settings)!;
    const token = await sign(Math.floor(Date.now() / 1000) + 600);
    const first = await verify(token);
    expect(await verify(token)).toBe(first);
  });

  it('never answers a kept token once it is past its exp and the clock allowance', async () => {
    const verify = tokenVerifier(settings)!;
    const now = Date.now();
    const token = await sign(Math.floor(now / 1000) + 60);
    await verify(token);
    // Only Date is faked (jose reads the clock through it); timers and crypto run as they do.
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(now + 60_000 + 31_000);
    await expect(verify(token)).rejects.toMatchObject({ code: 'TW_UNAUTHENTICATED' });
  });

  it('does not keep a token that failed, nor let a failure stand for a later good one', async () => {
    const verify = tokenVerifier(settings)!;
    const token = await sign(Math.floor(Date.now() / 1000) + 600);
    const tampered = `${token.slice(0, -2)}xx`;
    await expect(verify(tampered)).rejects.toMatchObject({ code: 'TW_UNAUTHENTICATED' });
    await expect(verify(tampered)).rejects.toMatchObject({ code: 'TW_UNAUTHENTICATED' });
    await expect(verify(token)).resolves.toMatchObject({ grants: { read: ['*'] } });
  });
});
