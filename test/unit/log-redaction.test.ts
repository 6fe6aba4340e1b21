import { describe, expect, it } from 'vitest';
import { redactUrl, requestForLog } from '../../src/http/log-redaction.js';

// What a log line may show of a request (docs/SECURITY.md, "What is logged").

describe('log redaction', () => {
  it.each([
    ['/s?access_token=abc.def.ghi', '/s?access_token=[redacted]'],
    ['/s?after=3&access_token=abc&tail=2', '/s?after=3&access_token=[redacted]&tail=2'],
    ['/s?access_token=a&access_token=b', '/s?access_token=[redacted]&access_token=[redacted]'],
    ['/s?ACCESS_TOKEN=abc#x', '/s?ACCESS_TOKEN=[redacted]#x'],
    ['/s?my_access_token=keep', '/s?my_access_token=keep'],
  ])('shows %s as %s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });

  it('logs a request by its method, redacted URL and address, and none of its headers', () => {
    const line = requestForLog({
      method: 'GET',
      url: '/api/v1/runs/stream?access_token=secret.token.here',
      ip: '127.0.0.1',
      headers: { authorization: 'Bearer secret.token.here' },
    } as { method: string; url: string; ip: string });
    expect(line).toEqual({
      method: 'GET',
      url: '/api/v1/runs/stream?access_token=[redacted]',
      remoteAddress: '127.0.0.1',
    });
    expect(JSON.stringify(line)).not.toContain('secret');
  });
});
