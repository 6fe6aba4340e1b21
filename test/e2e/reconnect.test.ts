import { EventSource } from 'eventsource';
import { afterEach, describe, expect, it } from 'vitest';
import { runKey } from '../../src/model/stream-key.js';
import { sendEvents, sendStatus } from '../helpers/api.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { seqOfId } from '../helpers/sse.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

const TOTAL = 10_000;
const PER_BATCH = 20;
const CUTS = 50;

describe('a viewer cut off 50 times during a run of 10,000 entries', () => {
  let t: TestApp | undefined;
  afterEach(async () => t?.close());

  it('ends with every entry exactly once, in order, resuming by Last-Event-ID', async () => {
    t = await createTestApp({ retryMillis: 5, pollSeconds: 0.05, finishGraceSeconds: 0.2 });
    const base = new URL(await t.listen());
    const proxy = await startTcpProxy(base.origin);
    const run = '/api/v1/pipelines/reconnect.test/runs/r1';
    await sendStatus(base.origin, run, 'running');

    const seen: number[] = [];
    const ids: string[] = [];
    let connections = 0;
    let openSinceCut = false;
    const source = new EventSource(`${proxy.url}${run}/stream`);
    source.addEventListener('open', () => {
      connections += 1;
      openSinceCut = true;
    });
    const onEntry = (event: MessageEvent) => {
      ids.push(event.lastEventId);
      seen.push(seqOfId(event.lastEventId));
    };
    source.addEventListener('log', onEntry);
    source.addEventListener('status', onEntry);
    source.addEventListener('progress', onEntry);
    const ended = new Promise<{ reason: string; lastSeq: number }>((resolve) =>
      source.addEventListener('end', (event) => {
        source.close();
        resolve(JSON.parse((event as MessageEvent).data));
      }),
    );

    // The producer: 10,000 entries in batches, paced so the cuts land during the run.
    const producing = (async () => {
      for (let sent = 0; sent < TOTAL; sent += PER_BATCH) {
        const events = Array.from({ length: PER_BATCH }, (_, i) => ({
          kind: 'progress',
          data: { n: sent + i },
        }));
        const res = await sendEvents(base.origin, run, events);
        expect(res.status).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 6));
      }
    })();

    // 50 cuts at random moments, each of a connection that had opened (so each is a resume).
    let cuts = 0;
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    while (cuts < CUTS) {
      await new Promise((resolve) => setTimeout(resolve, 10 + random() * 40));
      if (openSinceCut && proxy.open > 0) {
        openSinceCut = false;
        proxy.cutAll();
        cuts += 1;
      }
    }
    await producing;
    await sendStatus(base.origin, run, 'success');
    const end = await ended;
    await proxy.close();

    expect(cuts).toBe(CUTS);
    expect(connections).toBeGreaterThan(CUTS);
    expect(end.reason).toBe('runFinished');
    // status running, 10,000 events, status success: every seq once, in order.
    const lastSeq = TOTAL + 2;
    expect(end.lastSeq).toBe(lastSeq);
    expect(seen).toEqual(Array.from({ length: lastSeq }, (_, i) => i + 1));
    // Each id as the server wrote it: `<seq>-<the store's epoch>`.
    const { epoch } = await t.store.bounds(runKey('reconnect.test', 'r1'));
    expect(ids).toEqual(seen.map((seq) => `${seq}-${epoch}`));
  });
});
