import { EventSource } from 'eventsource';
import type { FetchLike } from 'eventsource';
import { afterEach, describe, expect, it } from 'vitest';
import { sendEvents } from '../helpers/api.js';
import { liveApps } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';
import { until } from '../helpers/wait.js';
import { SEED_ICEBERG_EVENT } from '../helpers/fixtures.js';

// The Iceberg dashboard dialect (docs/API.md, "Iceberg dashboard"): the seed's IcebergMonitor
// listens with EventSource for `connected` and `iceberg-mutation`; here it is the `eventsource`
// package, the same API in Node.

const EVENTS_PATH = '/compat/iceberg/events';
const CONNECTED =
  /^\{"clientId": "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"\}$/;

/** The seed's iceberg-mutation-event.json (its snapshotId cut to fit a JS number exactly). */
interface IcebergEvent {
  eventId: string;
  eventTimestamp: string;
  sourceApplication: string;
  tableIdentifier: string;
  eventType: string;
  payload: {
    operation: string;
    snapshotId: number;
    summary: Record<string, string>;
    manifestList: string;
    schemaChanged: boolean;
  };
}

const SEED_EVENT: IcebergEvent = SEED_ICEBERG_EVENT;

/** The n-th commit event, in the seed's shape. */
function commit(n: number): IcebergEvent {
  const hex = n.toString(16).padStart(12, '0');
  return {
    ...SEED_EVENT,
    eventId: `a7c8f2b1-3e4d-4f1a-b8c9-${hex}`,
    eventTimestamp: new Date(Date.UTC(2023, 9, 27, 10, 25, 40) + n * 1000).toISOString(),
    tableIdentifier: `production.reporting.table_${n}`,
    payload: {
      ...SEED_EVENT.payload,
      snapshotId: 8734628364872364 + n,
      summary: { ...SEED_EVENT.payload.summary, 'added-records': String(1000 * n) },
    },
  };
}

const { start, open, closeAll } = liveApps({ pollSeconds: 0.05 });
const sources: EventSource[] = [];
const proxies: TcpProxy[] = [];

afterEach(async () => {
  for (const source of sources.splice(0)) source.close();
  await closeAll();
  for (const proxy of proxies.splice(0)) await proxy.close();
});

// ---- helpers ----------------------------------------------------------------------------

/** The producer side: each commit event posted to the topic under its eventId. */
async function publish(t: TestApp, events: IcebergEvent[], kind = 'iceberg-mutation') {
  const response = await sendEvents(
    t,
    '/api/v1/topics/iceberg',
    events.map((data) => ({ kind, id: data.eventId, data })),
  );
  expect(response.status, await response.clone().text()).toBe(200);
  return response.json();
}

async function publishOther(t: TestApp, kind: string, data: unknown) {
  const response = await sendEvents(t, '/api/v1/topics/iceberg', [{ kind, data }]);
  expect(response.status).toBe(200);
}

interface Received {
  connected: string[];
  mutations: Array<{ lastEventId: string; data: string }>;
  opens: number;
}

/** A dashboard as in the seed's IcebergMonitor: EventSource, `connected`, `iceberg-mutation`. */
function dashboard(url: string, init?: { fetch?: FetchLike }) {
  const received: Received = { connected: [], mutations: [], opens: 0 };
  const es = new EventSource(url, init);
  sources.push(es);
  es.onopen = () => {
    received.opens += 1;
  };
  es.addEventListener('connected', (event) => received.connected.push(String(event.data)));
  es.addEventListener('iceberg-mutation', (event) => {
    received.mutations.push({ lastEventId: event.lastEventId, data: String(event.data) });
  });
  return { es, received };
}

const idsOf = (received: Received) => received.mutations.map((m) => m.lastEventId);
const eventIds = (events: IcebergEvent[]) => events.map((e) => e.eventId);

/** A loopback TCP proxy whose connections the test can cut. */
async function cuttingProxy(target: string): Promise<TcpProxy> {
  const proxy = await startTcpProxy(target);
  proxies.push(proxy);
  return proxy;
}

// ---- the wire ----------------------------------------------------------------------------------

describe('the Iceberg dashboard stream', () => {
  it('sends `connected` with {"clientId": "<uuid>"} byte for byte first, as the seed server wrote it', async () => {
    const t = await start();
    const reader = await open(t, EVENTS_PATH);
    expect(reader.status).toBe(200);
    expect(reader.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await reader.waitFor((events) => events.length >= 1);
    expect(reader.raw).toMatch(
      /^event: connected\ndata: \{"clientId": "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"\}\n\n$/,
    );

    await publish(t, [SEED_EVENT]);
    await reader.waitFor((events) => events.length >= 2);
    expect(reader.raw.slice(reader.raw.indexOf('\n\n') + 2)).toBe(
      `event: iceberg-mutation\ndata: ${JSON.stringify(SEED_EVENT)}\nid: ${SEED_EVENT.eventId}\n\n`,
    );
  });

  it("gives the eventsource client connected, then each iceberg-mutation with lastEventId = eventId and the producer's JSON", async () => {
    const t = await start();
    const { received } = dashboard(`${t.url}${EVENTS_PATH}`);
    await until(() => received.connected.length === 1, 'connected');
    expect(received.connected[0]).toMatch(CONNECTED);

    const events = [SEED_EVENT, commit(1), commit(2)];
    for (const event of events) {
      await publish(t, [event]);
      await until(() => idsOf(received).includes(event.eventId), `event ${event.eventId}`);
    }
    expect(received.mutations).toEqual(
      events.map((event) => ({ lastEventId: event.eventId, data: JSON.stringify(event) })),
    );
    // What IcebergMonitor renders from each event.
    const parsed = received.mutations.map((m) => JSON.parse(m.data) as IcebergEvent);
    expect(parsed).toEqual(events);
    expect(parsed[0]!.payload.summary['added-records']).toBe('15782093');
    expect(parsed[0]!.payload.snapshotId).toBe(SEED_EVENT.payload.snapshotId);
    expect(received.connected).toHaveLength(1);
  });

  it('keeps serving open and new dashboards after a producer posts an eventId holding a line break', async () => {
    const t = await start();
    const open = dashboard(`${t.url}${EVENTS_PATH}`);
    await until(() => open.received.connected.length === 1, 'connected');

    // An id that, written as `id: …`, would inject a line into the SSE stream. Refusing it (400)
    // or framing the event safely are both fine; breaking the stream is not.
    const bad = await fetch(`${t.url}/api/v1/topics/iceberg/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        events: [{ kind: 'iceberg-mutation', id: 'evil\nevent: x', data: { a: 1 } }],
      }),
    });
    expect([200, 400]).toContain(bad.status);

    await publish(t, [commit(1)]);
    await until(() => idsOf(open.received).includes(commit(1).eventId), 'the next event');
    const late = dashboard(`${t.url}${EVENTS_PATH}`);
    await until(() => idsOf(late.received).includes(commit(1).eventId), 'the replay', 5_000);
    for (const { received } of [open, late]) {
      expect(idsOf(received).every((id) => !/[\r\n]/.test(id))).toBe(true);
      expect(idsOf(received).at(-1)).toBe(commit(1).eventId);
    }
  });

  it('sends only iceberg-mutation events: other kinds on the topic are not sent at all', async () => {
    const t = await start();
    const reader = await open(t, EVENTS_PATH);
    await reader.waitFor((events) => events.length >= 1);
    await publish(t, [commit(1)]);
    await publishOther(t, 'table-stats', { table: 'x', rows: 1 });
    await publish(t, [commit(2)], 'iceberg-maintenance');
    await publish(t, [commit(3)]);
    await reader.waitFor((events) => events.some((e) => e.id === commit(3).eventId));

    expect(reader.events.map((e) => [e.event, e.id])).toEqual([
      ['connected', undefined],
      ['iceberg-mutation', commit(1).eventId],
      ['iceberg-mutation', commit(3).eventId],
    ]);
    expect(reader.raw).not.toContain('table-stats');
    expect(reader.raw).not.toContain('iceberg-maintenance');
    expect(reader.raw).not.toContain('event: cursor');
  });
});

// ---- history on connect -------------------------------------------------------------------------

describe('what a new Iceberg dashboard is sent on connect', () => {
  it('first gets the latest icebergReplayOnConnect events, then live ones', async () => {
    const t = await start({ icebergReplayOnConnect: 3 });
    const history = [1, 2, 3, 4, 5].map(commit);
    await publish(t, history);
    const { received } = dashboard(`${t.url}${EVENTS_PATH}`);
    await until(() => received.mutations.length === 3, 'the replay');
    expect(received.connected).toHaveLength(1);
    expect(idsOf(received)).toEqual(eventIds(history.slice(2)));

    await publish(t, [commit(6)]);
    await until(() => received.mutations.length === 4, 'a live event');
    expect(idsOf(received)).toEqual(eventIds([...history.slice(2), commit(6)]));
    expect(received.mutations.map((m) => JSON.parse(m.data))).toEqual([
      ...history.slice(2),
      commit(6),
    ]);
  });

  it('first gets the latest icebergReplayOnConnect mutations even when other kinds are interleaved on the topic', async () => {
    const t = await start({ icebergReplayOnConnect: 3 });
    const history = [1, 2, 3, 4, 5].map(commit);
    for (const event of history) {
      await publish(t, [event]);
      await publishOther(t, 'table-stats', { table: event.tableIdentifier });
    }
    const { received } = dashboard(`${t.url}${EVENTS_PATH}`);
    await until(() => received.connected.length === 1, 'connected');
    // The replay and a live marker event: everything before the marker is the replay.
    await publish(t, [commit(6)]);
    await until(() => idsOf(received).includes(commit(6).eventId), 'the live event');
    expect(idsOf(received)).toEqual(eventIds([...history.slice(2), commit(6)]));
  });

  it('sends no history with icebergReplayOnConnect = 0, only live events', async () => {
    const t = await start({ icebergReplayOnConnect: 0 });
    await publish(t, [commit(1), commit(2)]);
    const { received } = dashboard(`${t.url}${EVENTS_PATH}`);
    await until(() => received.connected.length === 1, 'connected');
    await publish(t, [commit(3)]);
    await until(() => received.mutations.length >= 1, 'the live event');
    expect(idsOf(received)).toEqual([commit(3).eventId]);
  });
});

// ---- resuming ----------------------------------------------------------------------------------

describe('an Iceberg dashboard that loses its connection', () => {
  it('resumes by Last-Event-ID after each cut, every event exactly once and in order', async () => {
    const t = await start();
    const proxy = await cuttingProxy(t.url);
    const lastEventIds: Array<string | null> = [];
    const recordingFetch: FetchLike = (url, init) => {
      lastEventIds.push(new Headers(init?.headers).get('last-event-id'));
      return fetch(url, init);
    };
    const all = [1, 2, 3, 4, 5, 6, 7].map(commit);
    await publish(t, all.slice(0, 2));

    const { received } = dashboard(`${proxy.url}${EVENTS_PATH}`, { fetch: recordingFetch });
    await until(() => received.mutations.length === 2, 'the replay on connect');

    // Cut; events are committed while the dashboard is away; it comes back by itself (3 s).
    proxy.cutAll();
    await publish(t, all.slice(2, 4));
    await until(() => received.opens === 2, 'the first reconnect', 15_000);
    await until(() => received.mutations.length === 4, 'what it missed');
    await publish(t, [all[4]!]);
    await until(() => received.mutations.length === 5, 'a live event');

    proxy.cutAll();
    await publish(t, all.slice(5));
    await until(() => received.opens === 3, 'the second reconnect', 15_000);
    await until(() => received.mutations.length === 7, 'what it missed again');

    expect(idsOf(received)).toEqual(eventIds(all));
    expect(received.mutations.map((m) => m.data)).toEqual(all.map((e) => JSON.stringify(e)));
    // Each reconnect named the last event seen; each connection got its own clientId.
    expect(lastEventIds).toEqual([null, all[1]!.eventId, all[4]!.eventId]);
    expect(received.connected).toHaveLength(3);
    expect(new Set(received.connected).size).toBe(3);
    // Nothing arrives twice afterwards either.
    await publish(t, [commit(8)]);
    await until(() => received.mutations.length === 8, 'a last live event');
    expect(idsOf(received)).toEqual(eventIds([...all, commit(8)]));
  }, 40_000);

  it('resumes after close and reopen with the Last-Event-ID header, without duplicates', async () => {
    const t = await start();
    await publish(t, [1, 2, 3].map(commit));
    const first = dashboard(`${t.url}${EVENTS_PATH}`);
    await until(() => first.received.mutations.length === 3, 'the replay');
    const last = first.received.mutations.at(-1)!.lastEventId;
    first.es.close();

    await publish(t, [4, 5].map(commit));
    const withHeader: FetchLike = (url, init) =>
      fetch(url, { ...init, headers: { ...init?.headers, 'Last-Event-ID': last } });
    const second = dashboard(`${t.url}${EVENTS_PATH}`, { fetch: withHeader });
    await until(() => second.received.mutations.length === 2, 'what it missed');
    await publish(t, [commit(6)]);
    await until(() => second.received.mutations.length === 3, 'a live event');
    expect(idsOf(second.received)).toEqual(eventIds([4, 5, 6].map(commit)));
  });

  it('resumes after an eventId that is not ASCII, sent back as a browser sends it: in UTF-8', async () => {
    const t = await start();
    const id = 'commit-é-😀';
    await publish(t, [{ ...commit(1), eventId: id }, commit(2)]);
    // A header carries bytes: the UTF-8 of the id, which fetch sends byte for byte from Latin-1.
    const header = Buffer.from(id, 'utf8').toString('latin1');
    const reader = await open(t, EVENTS_PATH, { 'Last-Event-ID': header });
    await reader.waitFor((events) => events.some((e) => e.id === commit(2).eventId));
    expect(reader.events.map((e) => [e.event, e.id])).toEqual([
      ['connected', undefined],
      ['iceberg-mutation', commit(2).eventId],
    ]);
  });

  it('resumes without duplicates from the id it was sent for an event stored without an eventId', async () => {
    const t = await start();
    // An event posted without a producer id is framed with `seq:<seq>`, which no eventId may be.
    await publishOther(t, 'iceberg-mutation', { tableIdentifier: 'no.event.id' });
    await publish(t, [commit(1)]);
    const first = dashboard(`${t.url}${EVENTS_PATH}`);
    await until(() => first.received.mutations.length === 2, 'the replay');
    const idOfAnonymous = first.received.mutations[0]!.lastEventId;
    expect(idOfAnonymous).toBe('seq:1');
    first.es.close();

    const withHeader: FetchLike = (url, init) =>
      fetch(url, { ...init, headers: { ...init?.headers, 'Last-Event-ID': idOfAnonymous } });
    const second = dashboard(`${t.url}${EVENTS_PATH}`, { fetch: withHeader });
    await until(() => second.received.connected.length === 1, 'connected');
    await publish(t, [commit(2)]);
    await until(() => idsOf(second.received).includes(commit(2).eventId), 'a live event');
    expect(idsOf(second.received)).toEqual(eventIds([commit(1), commit(2)]));
  });

  it('answers a seq: id past the end of the topic (from another server) with gap and the latest events, not the whole topic', async () => {
    const t = await start({ icebergReplayOnConnect: 2 });
    const history = [1, 2, 3, 4].map(commit);
    await publish(t, history);
    const withHeader: FetchLike = (url, init) =>
      fetch(url, { ...init, headers: { ...init?.headers, 'Last-Event-ID': 'seq:999' } });
    const reader = dashboard(`${t.url}${EVENTS_PATH}`, { fetch: withHeader });
    await until(() => reader.received.mutations.length === 2, 'the latest events');
    await publish(t, [commit(5)]);
    await until(() => idsOf(reader.received).includes(commit(5).eventId), 'a live event');
    expect(idsOf(reader.received)).toEqual(eventIds([commit(3), commit(4), commit(5)]));
  });
});
