import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TailwaterClientError } from '../../src/client/errors.js';
import { TailwaterClient } from '../../src/client/http-client.js';
import { tail } from '../../src/client/tail.js';
import type { TailEvent } from '../../src/client/tail.js';
import type { Entry } from '../../src/model/entry.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { freePort, scriptedServer } from '../helpers/net.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';

const FAST = { retryMillis: 5, pollSeconds: 0.05, finishGraceSeconds: 0.2 };
const FAST_BACKOFF = { initialMs: 5, maxMs: 50 };

/** Runs the iterator to its end, calling `onEvent` after each event is recorded. */
async function collect(
  iterator: AsyncIterable<TailEvent>,
  events: TailEvent[] = [],
  onEvent?: (event: TailEvent) => void | Promise<void>,
): Promise<TailEvent[]> {
  for await (const event of iterator) {
    events.push(event);
    await onEvent?.(event);
  }
  return events;
}

function entriesOf(events: TailEvent[]): Entry[] {
  return events.flatMap((event) => (event.type === 'entry' ? [event.entry] : []));
}

/** Resolves once `predicate` holds, polling every 5 ms; fails after `timeoutMs`. */
async function waitUntil(predicate: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`condition not met in ${timeoutMs} ms`);
    await delay(5);
  }
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8' };

function logFrame(seq: number, text: string): string {
  const entry = { seq, time: new Date().toISOString(), kind: 'log', offset: 0, text };
  return `id: ${seq}\nevent: log\ndata: ${JSON.stringify(entry)}\n\n`;
}

describe('tail()', () => {
  let t: TestApp | undefined;
  let proxy: TcpProxy | undefined;
  const cleanups: Array<() => Promise<void>> = [];

  beforeEach(() => {
    // The client falls back to TAILWATER_TOKEN; keep the environment out of these tests.
    vi.stubEnv('TAILWATER_TOKEN', '');
  });

  afterEach(async () => {
    vi.unstubAllEnvs();
    await proxy?.close();
    proxy = undefined;
    for (const cleanup of cleanups.splice(0)) await cleanup();
    if (t) {
      // undici answers a cancelled body (every tail() that stops mid-body) by opening a spare
      // connection it never uses; Node does not count that as idle, so app.close() would wait
      // for the client to drop it (undici's 4 s keep-alive). Cut it here.
      t.hub.shutdown();
      t.app.server.closeAllConnections();
      await t.close();
    }
    t = undefined;
  });

  it('yields the entries of a live run in order, then end with the final status', async () => {
    t = await createTestApp(FAST);
    const url = await t.listen();
    const client = new TailwaterClient({ server: url });
    const target = { pipeline: 'tail.order', runId: 'r1' };
    await client.setStatus('tail.order', 'r1', 'running');

    const events: TailEvent[] = [];
    const following = collect(
      tail({ server: url, target, signal: AbortSignal.timeout(20_000) }),
      events,
    );
    await waitUntil(() => events.length >= 1); // the `running` status entry: the viewer is live
    for (let n = 0; n < 20; n += 1) {
      await client.appendLog('tail.order', 'r1', `line ${n}\n`);
      await client.appendEvents(target, [{ kind: 'progress', data: { n }, step: 'train' }]);
    }
    await client.setStatus('tail.order', 'r1', 'success');
    await following;

    const entries = entriesOf(events);
    expect(entries.map((e) => e.seq)).toEqual(Array.from({ length: 42 }, (_, i) => i + 1));
    expect(entries[0]).toMatchObject({ kind: 'status', data: { status: 'running' } });
    expect(entries[1]).toMatchObject({ kind: 'log', text: 'line 0\n' });
    expect(entries[2]).toMatchObject({ kind: 'progress', data: { n: 0 }, step: 'train' });
    expect(entries[41]).toMatchObject({ kind: 'status', data: { status: 'success' } });
    expect(events.at(-1)).toEqual({
      type: 'end',
      end: { reason: 'runFinished', status: 'success', lastSeq: 42 },
    });
    expect(events.filter((e) => e.type === 'reconnecting')).toEqual([]);
  });

  it('yields open as soon as the server accepts, before any entry exists', async () => {
    t = await createTestApp(FAST);
    const url = await t.listen();
    const controller = new AbortController();
    const events: TailEvent[] = [];
    const following = collect(
      tail({
        server: url,
        target: { pipeline: 'tail.open', runId: 'r1' }, // no such run yet: nothing to send
        signal: controller.signal,
      }),
      events,
    );
    await waitUntil(() => events.length >= 1);
    expect(events).toEqual([{ type: 'open' }]);
    await new TailwaterClient({ server: url }).appendLog('tail.open', 'r1', 'hello\n');
    await waitUntil(() => entriesOf(events).some((e) => e.kind === 'log'));
    controller.abort();
    await following;
    // The append created the run: its `running` status, then the text.
    expect(events.map((e) => e.type)).toEqual(['open', 'entry', 'entry']);
    expect(entriesOf(events).map((e) => e.kind)).toEqual(['status', 'log']);
  });

  it('gives each entry the JSON text the server sent, exact where JSON.parse rounds', async () => {
    t = await createTestApp(FAST);
    const url = await t.listen();
    await t.app.inject({
      method: 'POST',
      url: '/api/v1/pipelines/tail.exact/runs/r1/events',
      headers: { 'content-type': 'application/json' },
      payload: '{"events":[{"kind":"commit","data":{"snapshotId":1234567890123456789}}]}',
    });
    await new TailwaterClient({ server: url }).setStatus('tail.exact', 'r1', 'success');
    const events = await collect(
      tail({ server: url, target: { pipeline: 'tail.exact', runId: 'r1' }, kinds: ['commit'] }),
    );
    const commit = events.find((e) => e.type === 'entry');
    expect(commit?.type).toBe('entry');
    if (commit?.type !== 'entry') return;
    expect(commit.json).toContain('"snapshotId":1234567890123456789');
    expect(commit.entry.data).toEqual({ snapshotId: 1234567890123456800 }); // JSON.parse's rounding
    expect(JSON.parse(commit.json)).toEqual(commit.entry);
  });

  it('follows the runs feed of only the pipelines named', async () => {
    t = await createTestApp(FAST);
    const url = await t.listen();
    const client = new TailwaterClient({ server: url });
    await client.setStatus('feed.other', 'o1', 'running');
    await client.setStatus('feed.a', 'r1', 'running');
    await client.setStatus('feed.c', 'c1', 'running');
    const controller = new AbortController();
    const events: TailEvent[] = [];
    const done = collect(
      tail({
        server: url,
        target: 'runs',
        tail: 10,
        pipelines: ['feed.a', 'feed.c'],
        signal: controller.signal,
      }),
      events,
      () => {
        if (entriesOf(events).length === 2) controller.abort();
      },
    ).catch(() => events);
    await done;
    const pipelines = entriesOf(events).map(
      (entry) => (entry.data as { pipeline: string }).pipeline,
    );
    expect(pipelines).toEqual(['feed.a', 'feed.c']);
  });

  it('surfaces a reset gap (cursor past the end) and follows the stream from its start to end', async () => {
    t = await createTestApp(FAST);
    const url = await t.listen();
    const client = new TailwaterClient({ server: url });
    await client.appendLog('tail.gap', 'r1', 'one\n');
    await client.appendLog('tail.gap', 'r1', 'two\n');
    await client.setStatus('tail.gap', 'r1', 'failed');

    const events = await collect(
      tail({
        server: url,
        target: { pipeline: 'tail.gap', runId: 'r1' },
        after: 500, // a cursor from a store that was replaced
        signal: AbortSignal.timeout(20_000),
      }),
    );

    expect(events[0]).toEqual({ type: 'open' });
    expect(events[1]).toEqual({ type: 'gap', gap: { reason: 'reset' } });
    expect(entriesOf(events).map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(
      entriesOf(events)
        .filter((e) => e.kind === 'log')
        .map((e) => e.text),
    ).toEqual(['one\n', 'two\n']);
    expect(events.at(-1)).toEqual({
      type: 'end',
      end: { reason: 'runFinished', status: 'failed', lastSeq: 4 },
    });
  });

  it('resumes after its connection is cut, with nothing lost and nothing twice', async () => {
    t = await createTestApp(FAST);
    const url = await t.listen();
    proxy = await startTcpProxy(url);
    const client = new TailwaterClient({ server: url });
    const target = { pipeline: 'tail.cut', runId: 'r1' };
    await client.setStatus('tail.cut', 'r1', 'running');

    const events: TailEvent[] = [];
    let sinceCut = 0;
    const following = collect(
      tail({
        server: proxy.url,
        target,
        backoff: FAST_BACKOFF,
        signal: AbortSignal.timeout(60_000),
      }),
      events,
      (event) => {
        if (event.type === 'entry') sinceCut += 1;
      },
    );

    // At least 600 entries, and more until the fifth cut: a cut needs an entry on the new
    // connection, so the producer outlasts the cuts however slowly the machine reconnects.
    let cuts = 0;
    let sent = 0;
    const producing = (async () => {
      while ((sent < 600 || cuts < 5) && sent < 20_000) {
        const batch = Array.from({ length: 10 }, (_, i) => ({ kind: 'progress', data: sent + i }));
        await client.appendEvents(target, batch);
        sent += 10;
        await delay(3);
      }
    })();
    // Cut 5 times, each after the viewer received something on its new connection.
    for (let tries = 0; cuts < 5 && tries < 2000; tries += 1) {
      await delay(10);
      if (sinceCut > 0 && proxy.open > 0) {
        sinceCut = 0;
        proxy.cutAll();
        cuts += 1;
      }
    }
    await producing;
    await client.setStatus('tail.cut', 'r1', 'success');
    await following;

    expect(cuts).toBe(5);
    expect(events.filter((e) => e.type === 'reconnecting').length).toBeGreaterThanOrEqual(5);
    expect(proxy.connections).toBeGreaterThanOrEqual(6);
    const TOTAL = sent;
    const lastSeq = TOTAL + 2;
    expect(entriesOf(events).map((e) => e.seq)).toEqual(
      Array.from({ length: lastSeq }, (_, i) => i + 1),
    );
    expect(
      entriesOf(events)
        .filter((e) => e.kind === 'progress')
        .map((e) => e.data),
    ).toEqual(Array.from({ length: TOTAL }, (_, i) => i));
    expect(events.at(-1)).toMatchObject({ type: 'end', end: { lastSeq } });
  });

  it('sends Authorization: Bearer <token> when given a token, and none otherwise', async () => {
    t = await createTestApp(FAST);
    const seen: Array<string | undefined> = [];
    t.app.addHook('onRequest', async (request) => {
      if (request.url.includes('/stream')) seen.push(request.headers.authorization);
    });
    const url = await t.listen();
    const client = new TailwaterClient({ server: url });
    await client.setStatus('tail.auth', 'r1', 'success');
    const target = { pipeline: 'tail.auth', runId: 'r1' };

    const withToken = await collect(tail({ server: url, target, token: 's3cret' }));
    const without = await collect(tail({ server: url, target }));

    expect(withToken.at(-1)?.type).toBe('end');
    expect(without.at(-1)?.type).toBe('end');
    expect(seen).toEqual(['Bearer s3cret', undefined]);
  });

  it('gives up, throwing, after maxRetries consecutive failures against a closed port', async () => {
    const port = await freePort();
    const events: TailEvent[] = [];
    const error = await collect(
      tail({
        server: `http://127.0.0.1:${port}`,
        target: { pipeline: 'tail.gone', runId: 'r1' },
        maxRetries: 3,
        backoff: FAST_BACKOFF,
      }),
      events,
    ).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(TailwaterClientError);
    expect((error as TailwaterClientError).status).toBe(0);
    expect((error as TailwaterClientError).message).toMatch(/Gave up .* after 3 failed attempts/);
    expect(events.map((e) => (e.type === 'reconnecting' ? e.attempt : e.type))).toEqual([1, 2, 3]);
  });

  it('makes maxRetries + 1 connections in all before giving up', async () => {
    let connections = 0;
    const server = net.createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));

    await expect(
      collect(
        tail({
          server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
          target: { pipeline: 'tail.refuse', runId: 'r1' },
          maxRetries: 4,
          backoff: FAST_BACKOFF,
        }),
      ),
    ).rejects.toThrow(/after 4 failed attempts/);
    expect(connections).toBe(5);
  });

  it('waits as long as Retry-After says after a 503, then connects again', async () => {
    const times: number[] = [];
    const server = await scriptedServer((n, _request, response) => {
      times.push(performance.now());
      if (n === 1) {
        response.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
        response.end(
          JSON.stringify({ error: { code: 'TW_TOO_MANY_STREAMS', message: 'Too many streams.' } }),
        );
        return;
      }
      response.writeHead(200, SSE_HEADERS);
      response.end(
        `${logFrame(1, 'hello\n')}event: end\ndata: {"reason":"runFinished","status":"success","lastSeq":1}\n\n`,
      );
    });
    cleanups.push(server.close);

    const events = await collect(
      tail({
        server: server.url,
        target: { pipeline: 'tail.busy', runId: 'r1' },
        backoff: { initialMs: 1, maxMs: 1 },
      }),
    );

    expect(events[0]).toEqual({
      type: 'reconnecting',
      attempt: 1,
      delayMs: 1000,
      reason: 'Too many streams.',
    });
    expect(times).toHaveLength(2);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(950);
    expect(entriesOf(events).map((e) => e.text)).toEqual(['hello\n']);
    expect(events.at(-1)?.type).toBe('end');
  });

  it('reconnects with its cursor after `end` shutdown instead of stopping', async () => {
    const lastEventIds: Array<string | undefined> = [];
    const server = await scriptedServer((n, request, response) => {
      lastEventIds.push(request.headers['last-event-id'] as string | undefined);
      response.writeHead(200, SSE_HEADERS);
      if (n === 1) {
        response.end(
          `${logFrame(1, 'before\n')}event: end\ndata: {"reason":"shutdown","lastSeq":1}\n\n`,
        );
      } else {
        response.end(
          `${logFrame(2, 'after\n')}event: end\ndata: {"reason":"runFinished","status":"success","lastSeq":2}\n\n`,
        );
      }
    });
    cleanups.push(server.close);

    const events = await collect(
      tail({
        server: server.url,
        target: { pipeline: 'tail.restart', runId: 'r1' },
        backoff: FAST_BACKOFF,
      }),
    );

    expect(lastEventIds).toEqual([undefined, '1']);
    expect(events.map((e) => e.type)).toEqual([
      'open',
      'entry',
      'reconnecting',
      'open',
      'entry',
      'end',
    ]);
    expect(events[2]).toMatchObject({ reason: expect.stringContaining('shutdown') });
    expect(entriesOf(events).map((e) => e.text)).toEqual(['before\n', 'after\n']);
    expect(events.at(-1)).toMatchObject({ end: { reason: 'runFinished', status: 'success' } });
  });

  it('replaces a connection that goes silent without closing, and resumes from its cursor', async () => {
    const lastEventIds: Array<string | undefined> = [];
    const server = await scriptedServer((n, request, response) => {
      lastEventIds.push(request.headers['last-event-id'] as string | undefined);
      response.writeHead(200, SSE_HEADERS);
      if (n === 1) {
        // One frame, then nothing at all: no heartbeat, no close (a dead NAT entry, say).
        response.write(logFrame(1, 'before\n'));
      } else {
        response.end(
          `${logFrame(2, 'after\n')}event: end\ndata: {"reason":"runFinished","status":"success","lastSeq":2}\n\n`,
        );
      }
    });
    cleanups.push(server.close);

    const started = performance.now();
    const events = await collect(
      tail({
        server: server.url,
        target: { pipeline: 'tail.silent', runId: 'r1' },
        readTimeoutMs: 300,
        backoff: FAST_BACKOFF,
        signal: AbortSignal.timeout(10_000),
      }),
    );

    expect(lastEventIds).toEqual([undefined, '1']);
    expect(events.map((e) => e.type)).toEqual([
      'open',
      'entry',
      'reconnecting',
      'open',
      'entry',
      'end',
    ]);
    expect(events[2]).toMatchObject({ reason: expect.stringContaining('went silent') });
    expect(entriesOf(events).map((e) => e.text)).toEqual(['before\n', 'after\n']);
    expect(performance.now() - started).toBeGreaterThanOrEqual(300);
  });

  it('does not count a slow consumer as a silent connection', async () => {
    const server = await scriptedServer((_n, _request, response) => {
      response.writeHead(200, SSE_HEADERS);
      response.end(
        `${logFrame(1, 'one\n')}${logFrame(2, 'two\n')}event: end\ndata: {"reason":"runFinished","status":"success","lastSeq":2}\n\n`,
      );
    });
    cleanups.push(server.close);
    const events = await collect(
      tail({
        server: server.url,
        target: { pipeline: 'tail.slow', runId: 'r1' },
        readTimeoutMs: 200,
      }),
      [],
      // Longer than the read timeout on each entry.
      async (event) => {
        if (event.type === 'entry') await delay(300);
      },
    );
    expect(events.map((e) => e.type)).toEqual(['open', 'entry', 'entry', 'end']);
    expect(server.requests).toBe(1);
  });

  it('throws at once on a refusal that retrying cannot fix (400)', async () => {
    t = await createTestApp(FAST);
    const url = await t.listen();
    const events: TailEvent[] = [];
    const error = await collect(
      tail({
        server: url,
        target: { pipeline: 'tail.bad', runId: 'r1' },
        tail: -1, // out of range: the server answers 400
      }),
      events,
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TailwaterClientError);
    expect((error as TailwaterClientError).status).toBe(400);
    expect(events).toEqual([]);
  });

  it('stops, without throwing, when its AbortSignal aborts while streaming', async () => {
    t = await createTestApp(FAST);
    const url = await t.listen();
    const client = new TailwaterClient({ server: url });
    await client.appendLog('tail.abort', 'r1', 'first\n');
    const controller = new AbortController();
    const events = await collect(
      tail({
        server: url,
        target: { pipeline: 'tail.abort', runId: 'r1' },
        signal: controller.signal,
      }),
      [],
      (event) => {
        if (event.type === 'entry' && event.entry.kind === 'log') controller.abort();
      },
    );
    // The run never ends; only the abort stopped the iteration.
    expect(events.map((e) => e.type)).toEqual(['open', 'entry', 'entry']);
    expect(entriesOf(events).at(-1)?.text).toBe('first\n');
    // The server lets the viewer go.
    await waitUntil(() => t!.hub.activeConnections === 0);
  });

  it('stops at once when its AbortSignal aborts during a reconnect wait', async () => {
    const port = await freePort();
    const controller = new AbortController();
    const started = performance.now();
    const events = await collect(
      tail({
        server: `http://127.0.0.1:${port}`,
        target: { pipeline: 'tail.abort', runId: 'r1' },
        backoff: { initialMs: 60_000, maxMs: 60_000 },
        signal: controller.signal,
      }),
      [],
      (event) => {
        if (event.type === 'reconnecting') controller.abort();
      },
    );
    expect(events.map((e) => e.type)).toEqual(['reconnecting']);
    // Ended by the abort, not after the 60 s backoff: half of it, however busy the machine.
    expect(performance.now() - started).toBeLessThan(30_000);
  });
});
