/**
 * A request as a log line shows it: never its token. `?access_token=` is cut from the URL (an
 * EventSource can send its token no other way), and headers, Authorization and Cookie among
 * them, are not logged at all (docs/SECURITY.md, "What is logged").
 */
export function requestForLog(request: { method: string; url: string; ip?: string }) {
  return {
    method: request.method,
    url: redactUrl(request.url),
    remoteAddress: request.ip,
  };
}

/** The URL with the value of every `access_token` parameter replaced. */
export function redactUrl(url: string): string {
  return url.replace(/([?&]access_token=)[^&#]*/gi, '$1[redacted]');
}
