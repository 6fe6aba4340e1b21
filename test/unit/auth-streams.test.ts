import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { runStreamPath } from '../helpers/api.js';
import { liveApps } from '../helpers/app.js';
import { closedWithin, endOf, entryEvents, hasEvent, hasSeq, seqs } from '../helpers/sse.js';

// Streams with authentication on (docs/SECURITY.md): none opens without a valid token or
// scope; one ends with `end tokenExpired` when its token expires, and resumes with a fresh
// token and its cursor; the runs feed shows only readable pipelines.

const SECRET = 'a-test-secret-of-more-than-thirty-two-bytes';
const { start, open, closeAll } = liveApps({
  authSecret: SECRET,
  pollSeconds: 0.05,
  finishGraceSeconds: 0.2,
});
afterEach(closeAll);

function token(claim: object, expiresAt = Math.floor(Date.now() / 1000) + 3600) {
  return new SignJWT({ tailwater: claim })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime(expiresAt)
    .sign(new TextEncoder().encode(SECRET));
}

const path = runStreamPath('etl.daily', 'r1');

describe('streams with authentication', () => {
  it('opens no stream without a token or without the scope: 401 and 403 before any frame', async () => {
    const t = await start();
    const none = await fetch(`${t.url}${path}`);
    expect(none.status).toBe(401);
    const other = await token({ read: ['pipeline:ml.*'] });
    const refused = await fetch(`${t.url}${path}?access_token=${other}`);
    expect(refused.status).toBe(403);
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/);
    expect(t.hub.activeConnections).toBe(0);
  });

  it('ends a stream with end tokenExpired once its token expires, and a fresh token resumes it by cursor', async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'first\n' });
    const expiresAt = Math.floor(Date.now() / 1000) + 2;
    const short = await token({ read: ['pipeline:etl.*'] }, expiresAt);
    const reader = await open(t, `${path}?access_token=${short}`);
    await reader.waitFor(hasSeq(2));
    await reader.waitFor(hasEvent('end'), 10_000);
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt * 1000);
    expect(endOf(reader.events)).toMatchObject({ reason: 'tokenExpired', lastSeq: 2 });

    await t.ingest.appendLog('etl.daily', 'r1', { text: 'while away\n' });
    const cursor = entryEvents(reader.events).at(-1)!.id!;
    const fresh = await token({ read: ['pipeline:etl.*'] });
    const resumed = await open(t, `${path}?access_token=${fresh}`, { 'last-event-id': cursor });
    await resumed.waitFor(hasSeq(3));
    expect(seqs(resumed.events)).toEqual([3]);
  });

  it('opens a ZenML stream for a token that may read the pipeline its run resolves to', async () => {
    const t = await start();
    await t.ingest.appendEvents({ type: 'run', pipeline: 'etl.daily', runId: 'z1' }, [
      { kind: 'step', data: { n: 1 } },
    ]);
    const reader = await token({ read: ['pipeline:etl.*'] });
    const stream = await open(
      t,
      `/compat/zenml/api/v1/runs/z1/events/stream?access_token=${reader}`,
    );
    await stream.waitFor((events) => events.some((event) => event.event === 'step'));
  });

  it('holds one token to maxStreamsPerToken open streams, counted apart from its address', async () => {
    const t = await start({ maxStreamsPerToken: 1 });
    const shared = await new SignJWT({ tailwater: { read: ['*'] } })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('dashboard-wall')
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode(SECRET));
    await open(t, `${path}?access_token=${shared}`);
    const second = await fetch(`${t.url}/api/v1/topics/t/stream?access_token=${shared}`);
    expect(second.status).toBe(429);
    expect(await second.json()).toMatchObject({ error: { code: 'TW_TOO_MANY_CLIENT_STREAMS' } });
    const another = await token({ read: ['*'] });
    await open(t, `/api/v1/topics/t/stream?access_token=${another}`);
    expect(t.hub.activeConnections).toBe(2);
  });

  it("ends OpenMetadata's and ZenML's streams in their own words when the token expires", async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'first\n' });
    const expiresAt = Math.floor(Date.now() / 1000) + 2;
    const short = await token({ read: ['pipeline:etl.*'] }, expiresAt);
    const om = await open(
      t,
      `/compat/openmetadata/api/v1/services/ingestionPipelines/logs/etl.daily/stream/r1?access_token=${short}`,
    );
    const zenml = await open(t, `/compat/zenml/api/v1/runs/r1/events/stream?access_token=${short}`);
    await closedWithin(om, 10_000);
    await closedWithin(zenml, 10_000);
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt * 1000);
    // OpenMetadata's UI reconnects at once after maxDuration, so that is what it is told.
    const last = JSON.parse(om.events.at(-1)!.data) as {
      eventType: string;
      reason: string;
      message: string;
    };
    expect(last).toMatchObject({ eventType: 'complete', reason: 'maxDuration' });
    expect(last.message).toMatch(/token expired/);
    // ZenML's client resumes a body that ends without `end`: no end frame, so it reconnects.
    expect(zenml.events.some((event) => event.event === 'end' || event.event === 'error')).toBe(
      false,
    );
  });

  it('shows a token only the runs feed entries of pipelines it may read', async () => {
    const t = await start();
    const reader = await token({ read: ['pipeline:etl.*'] });
    const feed = await open(t, `/api/v1/runs/stream?access_token=${reader}`);
    await t.ingest.putRun('ml.train', 'r1', { status: 'running' });
    await t.ingest.putRun('etl.daily', 'r1', { status: 'running' });
    await t.ingest.putRun('ml.train', 'r2', { status: 'running' });
    await t.ingest.putRun('etl.hourly', 'r1', { status: 'running' });
    await feed.waitFor((events) => entryEvents(events).length >= 2);
    // A later entry the token may read shows nothing it may not was let through in between.
    await t.ingest.putRun('etl.daily', 'r1', { status: 'success' });
    await feed.waitFor((events) => entryEvents(events).length >= 3);
    const pipelines = entryEvents(feed.events).map(
      (event) => (JSON.parse(event.data) as { data: { pipeline: string } }).data.pipeline,
    );
    expect(pipelines).toEqual(['etl.daily', 'etl.hourly', 'etl.daily']);
  });
});
