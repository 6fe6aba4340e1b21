import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { readAllEntries, sendEvents, sendLog } from '../helpers/api.js';
import { startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';

const BATCH = 25;

interface Acked {
  seq: number;
  content: string;
}

function expectGapless(entries: Entry[]): void {
  entries.forEach((entry, index) => expect(entry.seq).toBe(index + 1));
}

describe('a real tailwater serve killed with SIGKILL during a burst of appends', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-crash-'));
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps every acknowledged entry, gapless, and nothing half-written, after a restart', async () => {
    server = await startServerProcess(['--data', dir]);
    const base = server.url;
    const logAcks = new Map<string, Acked[]>(); // per run path
    const topicAcks: Array<{ batch: string; seqs: number[] }> = [];
    let stop = false;
    let acked = 0;

    // Three writers share one run (concurrent seq assignment on one stream), one has a run of
    // its own, two append event batches to one topic.
    const logWriter = async (writer: string, runPath: string) => {
      const acks = logAcks.get(runPath) ?? [];
      logAcks.set(runPath, acks);
      for (let n = 0; !stop; n += 1) {
        const content = `${writer} line ${n} ${'x'.repeat(n % 50)}\n`;
        try {
          const res = await sendLog(base, runPath, content);
          if (res.status !== 200) continue;
          const { seq } = (await res.json()) as { seq: number };
          acks.push({ seq, content });
          acked += 1;
        } catch {
          return; // the server is gone: this append was never acknowledged
        }
      }
    };
    const topicWriter = async (writer: string) => {
      for (let n = 0; !stop; n += 1) {
        const batch = `${writer}-${n}`;
        const events = Array.from({ length: BATCH }, (_, i) => ({
          kind: 'commit',
          data: { batch, i },
        }));
        try {
          const res = await sendEvents(base, '/api/v1/topics/crash', events);
          if (res.status !== 200) continue;
          const { seqs } = (await res.json()) as { seqs: number[] };
          topicAcks.push({ batch, seqs });
          acked += 1;
        } catch {
          return;
        }
      }
    };

    const runA = '/api/v1/pipelines/crash.shared/runs/a';
    const runB = '/api/v1/pipelines/crash.solo/runs/b';
    const writers = [
      logWriter('w0', runA),
      logWriter('w1', runA),
      logWriter('w2', runA),
      logWriter('w3', runB),
      topicWriter('t0'),
      topicWriter('t1'),
    ];
    // Kill in the middle of the burst, once a good number of appends were acknowledged.
    const deadline = Date.now() + 30_000;
    while (acked < 1500 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(acked).toBeGreaterThanOrEqual(1500);
    server.child.kill('SIGKILL');
    await server.stop('SIGKILL');
    stop = true;
    await Promise.all(writers);

    server = await startServerProcess(['--data', dir]);
    for (const [runPath, acks] of logAcks) {
      const entries = await readAllEntries(server.url, runPath);
      expectGapless(entries);
      const bySeq = new Map(entries.map((entry) => [entry.seq, entry]));
      for (const ack of acks) expect(bySeq.get(ack.seq)?.text).toBe(ack.content);
      // Every stored log entry is a whole line a writer sent, at a contiguous byte offset.
      let offset = 0;
      for (const entry of entries.filter((e) => e.kind === 'log')) {
        expect(entry.text).toMatch(/^w\d line \d+ x*\n$/);
        expect(entry.offset).toBe(offset);
        offset += Buffer.byteLength(entry.text!, 'utf8');
      }
    }
    const topic = await readAllEntries(server.url, '/api/v1/topics/crash');
    expectGapless(topic);
    const byBatch = new Map<string, Entry[]>();
    for (const entry of topic) {
      const { batch } = entry.data as { batch: string };
      byBatch.set(batch, [...(byBatch.get(batch) ?? []), entry]);
    }
    // A batch is all or nothing, stored contiguously in order.
    for (const entries of byBatch.values()) {
      expect(entries).toHaveLength(BATCH);
      entries.forEach((entry, i) => {
        expect((entry.data as { i: number }).i).toBe(i);
        expect(entry.seq).toBe(entries[0]!.seq + i);
      });
    }
    for (const { batch, seqs } of topicAcks) {
      expect(byBatch.get(batch)?.map((entry) => entry.seq)).toEqual(seqs);
    }
  });
});
