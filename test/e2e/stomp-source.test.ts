import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { EventSource } from 'eventsource';
import { afterEach, describe, expect, it } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { readAllEntries } from '../helpers/api.js';
import { startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { openSse, seqOfId } from '../helpers/sse.js';
import type { SseReader } from '../helpers/sse.js';
import { portOpen, startActiveMq, STOMP_PORT, stopActiveMq } from '../helpers/stomp.js';
import {
  commitEvent,
  freshSource,
  removeDurableSubscription,
  stompProducer,
  TOPIC,
  waitUntil,
} from '../helpers/stomp-clients.js';
import type { Readyz, Source, SourceStatus, StompProducer } from '../helpers/stomp-clients.js';
import { sleep } from '../helpers/wait.js';

/**
 * Issue #6, "Done when": the STOMP source against a real ActiveMQ (scripts/services.sh) and a
 * real `tailwater serve` process configured through TAILWATER_SOURCES.
 *
 * Durable subscriptions outlive the processes and the tests in the broker, so every test has its
 * own destination and its own source name (which names the durable subscription and, with the
 * host name, the STOMP client-id), and removes its subscription afterwards.
 */

// The seed's event (001, `iceberg-mutation-event.json`), verbatim: snapshotId is above 2^53.
const SEED_EVENT = `{
  "eventId": "a7c8f2b1-3e4d-4f1a-b8c9-2d0e1a5b6c7d",
  "eventTimestamp": "2023-10-27T10:25:40.123Z",
  "sourceApplication": "spark-daily-etl-job-05",
  "tableIdentifier": "production.reporting.daily_user_activity",
  "eventType": "COMMIT_SUCCESS",
  "payload": {
    "operation": "append",
    "snapshotId": 8734628364872364872,
    "summary": {
      "added-data-files": "128",
      "added-records": "15782093",
      "total-records": "983456123",
      "changed-partition-count": "3"
    },
    "manifestList": "s3://bucket/path/to/snap-8734628364872364872-1-a9b8c7d6.avro",
    "schemaChanged": false
  }
}`;
const SEED_EVENT_ID = 'a7c8f2b1-3e4d-4f1a-b8c9-2d0e1a5b6c7d';

async function readyz(url: string): Promise<{ code: number; body: Readyz }> {
  const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) });
  return { code: res.status, body: (await res.json()) as Readyz };
}

async function sourceState(url: string, name: string): Promise<SourceStatus | undefined> {
  return (await readyz(url)).body.sources.find((source) => source.name === name);
}

/** Every entry of a topic, page by page. */
const allEntries = (url: string, topic: string): Promise<Entry[]> =>
  readAllEntries(url, `/api/v1/topics/${topic}`);

const ids = (entries: Entry[]) => entries.map((entry) => entry.id);

describe('the STOMP source against a real ActiveMQ and a real tailwater serve', () => {
  const servers: ServerProcess[] = [];
  const dirs: string[] = [];
  const names: string[] = [];
  const closers: (() => unknown)[] = [];

  afterEach(async () => {
    for (const close of closers.splice(0)) {
      try {
        await Promise.race([close(), sleep(5000)]);
      } catch {
        // already closed
      }
    }
    for (const server of servers.splice(0)) {
      const exited = await Promise.race([server.stop('SIGTERM'), sleep(10_000).then(() => null)]);
      if (exited === null) await server.stop('SIGKILL');
    }
    // A test that stopped the broker must not leave it stopped for the next one.
    if (!(await portOpen(STOMP_PORT))) await startActiveMq();
    for (const name of names.splice(0)) {
      // The client-id and subscription name a source on SQLite gives its subscription.
      await removeDurableSubscription(`tailwater-${name}-${hostname()}`, `tailwater-${name}`);
    }
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  function dataDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'tailwater-stomp-'));
    dirs.push(dir);
    return dir;
  }

  function source(): Source {
    const s = freshSource('test');
    names.push(s.name);
    return s;
  }

  async function serve(
    dir: string,
    src: Source,
    env: Record<string, string> = {},
  ): Promise<ServerProcess> {
    const server = await startServerProcess(['--data', dir], {
      TAILWATER_SOURCES: JSON.stringify([src]),
      ...env,
    });
    servers.push(server);
    return server;
  }

  async function stop(server: ServerProcess): Promise<number | string> {
    const code = await Promise.race([server.stop('SIGTERM'), sleep(15_000).then(() => 'timeout')]);
    servers.splice(servers.indexOf(server), 1);
    if (code === 'timeout') await server.stop('SIGKILL');
    return code;
  }

  async function connectedProducer() {
    const p = await stompProducer();
    closers.push(() => p.close());
    return p;
  }

  async function waitConnected(url: string, name: string, timeoutMs = 20_000) {
    return waitUntil(
      `source ${name} connected`,
      async () => {
        const state = await sourceState(url, name);
        return state?.state === 'connected' ? state : undefined;
      },
      timeoutMs,
    );
  }

  /**
   * A topic subscription receives only what is published after the broker registered it, and
   * "connected" on /readyz is said just before SUBSCRIBE is sent. So, like a careful operator,
   * publish probe events until one is stored: from then on the (durable) subscription exists.
   * Returns the probe ids stored, which precede anything published later.
   */
  async function ensureSubscribed(url: string, src: Source, p: StompProducer): Promise<string[]> {
    await waitConnected(url, src.name);
    let n = 0;
    await waitUntil(
      'a probe event to be stored',
      async () => {
        const stored = (await allEntries(url, TOPIC)).some((e) => e.id?.startsWith('probe-'));
        if (stored) return true;
        await p.publish(commitEvent(`probe-${n++}`, { probe: true }), src.destination);
        return undefined;
      },
      20_000,
      200,
    );
    // Probes published after the first stored one follow it: wait for all of them.
    const probes = Array.from({ length: n }, (_, i) => `probe-${i}`);
    return waitUntil(
      'the probes to settle',
      async () => {
        const stored = ids(await allEntries(url, TOPIC)).filter((id) => id?.startsWith('probe-'));
        return stored.at(-1) === probes.at(-1) ? (stored as string[]) : undefined;
      },
      10_000,
    );
  }

  it('delivers the seed event to the topic and to /compat/iceberg/events as it is published (pushed: before any poll), byte for byte', async () => {
    const src = source();
    // pollSeconds far above a push's latency: an event that arrives sooner was pushed.
    const POLL_SECONDS = 30;
    const server = await serve(dataDir(), src, { TAILWATER_POLL_SECONDS: String(POLL_SECONDS) });
    const p = await connectedProducer();
    const probes = await ensureSubscribed(server.url, src, p);

    // The native topic stream, open before publishing.
    const native: SseReader = await openSse(
      `${server.url}/api/v1/topics/${TOPIC}/stream?from=latest`,
    );
    closers.push(() => native.close());

    // A dashboard (the seed's EventSource client), open and caught up before publishing.
    const es = new EventSource(`${server.url}/compat/iceberg/events`);
    closers.push(() => es.close());
    const received: { id: string; data: string; at: number }[] = [];
    let connected = false;
    es.addEventListener('connected', () => (connected = true));
    es.addEventListener('iceberg-mutation', (e) => {
      const message = e as MessageEvent;
      received.push({ id: message.lastEventId, data: message.data, at: performance.now() });
    });
    await waitUntil(
      'the dashboard to replay the probes',
      async () => (connected && received.some((r) => r.id === probes.at(-1)) ? true : undefined),
      10_000,
      20,
    );

    const publishedAt = performance.now();
    await p.publish(SEED_EVENT, src.destination);
    const got = await waitUntil(
      'the seed event on /compat/iceberg/events',
      async () => received.find((r) => r.id === SEED_EVENT_ID),
      POLL_SECONDS * 1000,
      5,
    );
    const latencyMs = got.at - publishedAt;
    expect(got.data).toBe(SEED_EVENT);
    expect(got.data).toContain('"snapshotId": 8734628364872364872');
    expect(received.filter((r) => r.id === SEED_EVENT_ID)).toHaveLength(1);

    // The native topic stream: the entry with the eventId as its producer id.
    await native.waitFor(
      (events) =>
        events.some((e) => e.event === 'iceberg-mutation' && e.data.includes(SEED_EVENT_ID)),
      5000,
    );
    const frame = native.events.find((e) => e.event === 'iceberg-mutation')!;
    const entry = JSON.parse(frame.data) as Entry & { data: Record<string, unknown> };
    expect(entry.id).toBe(SEED_EVENT_ID);
    expect(seqOfId(frame.id)).toBe(entry.seq);
    expect(entry.data['eventId']).toBe(SEED_EVENT_ID);
    expect(entry.data['tableIdentifier']).toBe('production.reporting.daily_user_activity');

    // And in the topic's history, once, after the probes.
    const entries = await allEntries(server.url, TOPIC);
    expect(ids(entries)).toEqual([...probes, SEED_EVENT_ID]);
    expect(entries.at(-1)!.kind).toBe('iceberg-mutation');

    // Pushed, not polled: nine commits more, each on the dashboard before the next is published,
    // and all ten since the seed event in less than one pollSeconds, so that at most one of them
    // can have waited for a poll.
    for (let i = 0; i < 9; i += 1) {
      const id = `pushed-${i}`;
      await p.publish(commitEvent(id), src.destination);
      await waitUntil(
        `${id} on /compat/iceberg/events`,
        async () => (received.some((r) => r.id === id) ? true : undefined),
        POLL_SECONDS * 1000,
        5,
      );
    }
    const elapsedMs = performance.now() - publishedAt;
    console.log(
      `seed event: published → EventSource in ${latencyMs.toFixed(1)} ms; ` +
        `ten events one after another in ${elapsedMs.toFixed(0)} ms`,
    );
    expect(elapsedMs).toBeLessThan(POLL_SECONDS * 1000);
  });

  it('stores 1,000 events published while Tailwater was stopped, once each and in order, when it starts', async () => {
    const src = source();
    const dir = dataDir();
    const first = await serve(dir, src);
    const p = await connectedProducer();
    // The durable subscription now exists in the broker.
    const probes = await ensureSubscribed(first.url, src, p);
    expect(await stop(first)).toBe(0);

    const expected = Array.from({ length: 1000 }, (_, i) => `e-${String(i).padStart(4, '0')}`);
    const sendStarted = performance.now();
    await Promise.all(
      expected.map((id, i) => p.publish(commitEvent(id, { n: i }), src.destination)),
    );
    console.log(
      `1,000 events confirmed by ActiveMQ in ${(performance.now() - sendStarted).toFixed(0)} ms`,
    );

    const startedAt = performance.now();
    const second = await serve(dir, src);
    await waitUntil(
      'the 1,000 events to be stored',
      async () =>
        (await allEntries(second.url, TOPIC)).length >= probes.length + expected.length
          ? true
          : undefined,
      60_000,
      200,
    );
    console.log(
      `1,000 waiting events stored ${(performance.now() - startedAt).toFixed(0)} ms after start`,
    );
    // Anything redelivered late would show up now.
    await sleep(1000);
    const entries = await allEntries(second.url, TOPIC);
    expect(ids(entries)).toEqual([...probes, ...expected]);
    expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i + 1));
    expect(entries.slice(probes.length).map((e) => (e.data as { n: number }).n)).toEqual(
      expected.map((_, i) => i),
    );
    const status = await sourceState(second.url, src.name);
    expect(status).toMatchObject({ state: 'connected', invalid: 0 });
  });

  it('stores an eventId delivered twice once, acknowledges both copies and goes on', async () => {
    const src = source();
    const dir = dataDir();
    const server = await serve(dir, src);
    const p = await connectedProducer();
    const probes = await ensureSubscribed(server.url, src, p);

    await p.publish(commitEvent('dup-1', { copy: 1 }), src.destination);
    await p.publish(commitEvent('dup-1', { copy: 2 }), src.destination);
    await p.publish(commitEvent('after-dup'), src.destination);
    await waitUntil(
      'the event after the duplicate',
      async () =>
        (await allEntries(server.url, TOPIC)).some((e) => e.id === 'after-dup') ? true : undefined,
      10_000,
    );
    const entries = await allEntries(server.url, TOPIC);
    expect(ids(entries)).toEqual([...probes, 'dup-1', 'after-dup']);
    // The first copy is the one kept.
    expect(entries[probes.length]!.data).toMatchObject({ eventId: 'dup-1', copy: 1 });
    const status = await sourceState(server.url, src.name);
    expect(status?.received).toBe(probes.length + 3);

    // Both copies were acknowledged: a new process on the subscription gets nothing again.
    expect(await stop(server)).toBe(0);
    const again = await serve(dir, src);
    await waitConnected(again.url, src.name);
    await sleep(2000);
    expect((await sourceState(again.url, src.name))?.received).toBe(0);
    expect(ids(await allEntries(again.url, TOPIC))).toEqual([...probes, 'dup-1', 'after-dup']);
  });

  it('puts invalid messages into iceberg.invalid with the raw body and a reason, not blocking the valid ones', async () => {
    const src = source();
    const server = await serve(dataDir(), src);
    const p = await connectedProducer();
    const probes = await ensureSubscribed(server.url, src, p);

    const notJson = 'this is {not JSON';
    const noEventId = '{"eventType":"COMMIT_SUCCESS","tableIdentifier":"db.t"}';
    await p.publish(commitEvent('valid-before'), src.destination);
    await p.publish(notJson, src.destination);
    await p.publish(noEventId, src.destination);
    await p.publish(commitEvent('valid-after'), src.destination);

    await waitUntil(
      'the valid event after the invalid ones',
      async () =>
        (await allEntries(server.url, TOPIC)).some((e) => e.id === 'valid-after')
          ? true
          : undefined,
      10_000,
    );
    expect(ids(await allEntries(server.url, TOPIC))).toEqual([
      ...probes,
      'valid-before',
      'valid-after',
    ]);

    const invalid = await allEntries(server.url, `${TOPIC}.invalid`);
    expect(invalid).toHaveLength(2);
    const [first, second] = invalid.map((e) => e.data as Record<string, unknown>);
    expect(invalid.map((e) => e.kind)).toEqual(['invalid', 'invalid']);
    expect(first!['body']).toBe(notJson);
    expect(first!['reason']).toMatch(/not valid JSON/);
    expect(second!['body']).toBe(noEventId);
    expect(second!['reason']).toMatch(/eventId/);
    for (const data of [first!, second!]) {
      expect(data['destination']).toBe(src.destination);
      expect(typeof data['messageId']).toBe('string');
    }
    expect(await sourceState(server.url, src.name)).toMatchObject({
      state: 'connected',
      invalid: 2,
    });
  });

  it('does not stall on a message the store refuses (an eventId with a line break, an event over 64 KiB)', async () => {
    const src = source();
    const server = await serve(dataDir(), src);
    const p = await connectedProducer();
    const probes = await ensureSubscribed(server.url, src, p);

    // Valid JSON with a string eventId, so the source hands both to the store, which refuses
    // them for good: a producer id with a control character, and data over maxEventBytes.
    const lineBreakId = '{"eventId":"bad\\nid","eventType":"COMMIT_SUCCESS"}';
    const oversized = commitEvent('too-big', { padding: 'x'.repeat(70 * 1024) });
    await p.publish(commitEvent('valid-before'), src.destination);
    await p.publish(lineBreakId, src.destination);
    await p.publish(oversized, src.destination);
    await p.publish(commitEvent('valid-after'), src.destination);

    try {
      await waitUntil(
        'the valid event after the refused ones',
        async () =>
          (await allEntries(server.url, TOPIC)).some((e) => e.id === 'valid-after')
            ? true
            : undefined,
        10_000,
      );
    } catch (error) {
      const status = await sourceState(server.url, src.name);
      throw new Error(
        `${(error as Error).message}; /readyz says ${JSON.stringify(status)}; stored: ` +
          JSON.stringify(ids(await allEntries(server.url, TOPIC))),
      );
    }
    expect(ids(await allEntries(server.url, TOPIC))).toEqual([
      ...probes,
      'valid-before',
      'valid-after',
    ]);
    const invalid = (await allEntries(server.url, `${TOPIC}.invalid`)).map(
      (e) => e.data as Record<string, unknown>,
    );
    expect(invalid).toHaveLength(2);
    expect(invalid[0]!['body']).toBe(lineBreakId);
    expect(typeof invalid[0]!['reason']).toBe('string');
    // The oversized body cannot be kept whole within maxEventBytes: a prefix of it at least.
    expect(typeof invalid[1]!['reason']).toBe('string');
    expect(oversized.startsWith(String(invalid[1]!['body']))).toBe(true);
  });

  it('stores every event once, in order, when Tailwater is killed (SIGKILL) in the middle of a burst', async () => {
    const src = source();
    const dir = dataDir();
    const first = await serve(dir, src);
    const p = await connectedProducer();
    const probes = await ensureSubscribed(first.url, src, p);

    const expected = Array.from({ length: 1000 }, (_, i) => `k-${String(i).padStart(4, '0')}`);
    const publishing = Promise.all(
      expected.map((id, i) => p.publish(commitEvent(id, { n: i }), src.destination)),
    );
    // Kill it once part of the burst is stored: some messages are stored and not yet acked.
    await waitUntil(
      'part of the burst to be stored',
      async () =>
        (await allEntries(first.url, TOPIC)).length > probes.length + 100 ? true : undefined,
      20_000,
      20,
    );
    servers.splice(servers.indexOf(first), 1);
    expect(await first.stop('SIGKILL')).toBe('SIGKILL');
    await publishing;

    const second = await serve(dir, src);
    await waitUntil(
      'the whole burst to be stored',
      async () =>
        (await allEntries(second.url, TOPIC)).length >= probes.length + expected.length
          ? true
          : undefined,
      60_000,
      200,
    );
    await sleep(1000);
    const entries = await allEntries(second.url, TOPIC);
    expect(ids(entries)).toEqual([...probes, ...expected]);
    expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i + 1));
  });

  it('reconnects after ActiveMQ restarts under it and stores every event published once the broker is back', async () => {
    const src = source();
    const server = await serve(dataDir(), src);
    const before = await connectedProducer();
    const probes = await ensureSubscribed(server.url, src, before);
    await before.publish(commitEvent('before-0'), src.destination);
    await waitUntil(
      'the event before the restart',
      async () =>
        (await allEntries(server.url, TOPIC)).some((e) => e.id === 'before-0') ? true : undefined,
      10_000,
    );
    expect(await readyz(server.url)).toMatchObject({ code: 200, body: { status: 'ready' } });

    const stoppedAt = performance.now();
    await stopActiveMq();
    console.log(`ActiveMQ stopped in ${(performance.now() - stoppedAt).toFixed(0)} ms`);
    const down = await waitUntil(
      '/readyz to report the source not connected',
      async () => {
        const r = await readyz(server.url);
        const s = r.body.sources.find((x) => x.name === src.name);
        return s && s.state !== 'connected' ? r : undefined;
      },
      20_000,
    );
    expect(down.code).toBe(200);
    expect(down.body.status).toBe('degraded');
    expect(['disconnected', 'connecting']).toContain(
      down.body.sources.find((x) => x.name === src.name)!.state,
    );
    // Still not connected while the broker is down.
    await sleep(1500);
    expect((await sourceState(server.url, src.name))?.state).not.toBe('connected');

    const startedAt = performance.now();
    await startActiveMq();
    console.log(`ActiveMQ started in ${(performance.now() - startedAt).toFixed(0)} ms`);

    // Published as soon as the broker is back, most likely before Tailwater reconnected: the
    // durable subscription keeps them.
    const p = await connectedProducer();
    const early = Array.from({ length: 20 }, (_, i) => `early-${i}`);
    for (const id of early) await p.publish(commitEvent(id), src.destination);

    await waitConnected(server.url, src.name, 60_000);
    console.log(
      `source reconnected ${(performance.now() - startedAt).toFixed(0)} ms after the broker started`,
    );
    expect(await readyz(server.url)).toMatchObject({ code: 200, body: { status: 'ready' } });

    const late = Array.from({ length: 20 }, (_, i) => `late-${i}`);
    for (const id of late) await p.publish(commitEvent(id), src.destination);
    await waitUntil(
      'the events published after the restart',
      async () =>
        (await allEntries(server.url, TOPIC)).some((e) => e.id === 'late-19') ? true : undefined,
      30_000,
      200,
    );
    await sleep(1000);
    expect(ids(await allEntries(server.url, TOPIC))).toEqual([
      ...probes,
      'before-0',
      ...early,
      ...late,
    ]);
  }, 240_000);
});
