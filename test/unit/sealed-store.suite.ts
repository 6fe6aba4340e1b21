import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runKey } from '../../src/model/stream-key.js';
import type { SealCatalog } from '../../src/store/seal-catalog.js';
import { SealedStore } from '../../src/store/sealed-store.js';
import type { SealedStoreOptions } from '../../src/store/sealed-store.js';
import type { SealStep } from '../../src/store/sealer.js';
import type { SegmentStore } from '../../src/store/segment-store.js';
import type { Store } from '../../src/store/store.js';
import {
  KEYS,
  PIPELINE,
  SMALL_SEGMENTS as SMALL,
  indexAll,
  readEverything,
  writeHistory,
} from '../helpers/sealed-history.js';

// Sealed history (docs/STORAGE.md, "Sealed segments"), on every hot store and segment store:
// every read path answers the same before and after sealing, byte for byte, and a seal
// interrupted at any step loses nothing and duplicates nothing.

const later = () => Date.now() + 1000;

/** Opens stores on one place's data: each call a new connection to the same data. */
export interface SealedBackend {
  hot(): Promise<Store & SealCatalog>;
  segments(): SegmentStore;
  cleanup(): Promise<void>;
}

export function sealedHistorySuite(name: string, backend: () => Promise<SealedBackend>): void {
  describe(`sealed history: ${name}`, () => {
    let place: SealedBackend;
    let stores: SealedStore[] = [];

    async function open(options: Partial<SealedStoreOptions> = {}): Promise<SealedStore> {
      const store = new SealedStore(await place.hot(), place.segments(), { ...SMALL, ...options });
      stores.push(store);
      return store;
    }

    async function segmentNames(): Promise<string[]> {
      const segments = place.segments();
      try {
        return (await segments.list('')).map((object) => object.name);
      } finally {
        await segments.close();
      }
    }

    beforeEach(async () => {
      place = await backend();
      stores = [];
    });

    afterEach(async () => {
      for (const store of stores) await store.close().catch(() => undefined);
      await place.cleanup();
    });

    it('answers every read path byte for byte as the hot store did, in many segments', async () => {
      const store = await open();
      await writeHistory(store);
      await indexAll(store);
      const before = await readEverything(store);
      // The answers compared are not empty ones.
      expect((before['search rare-needle'] as unknown[][])[0]!.length).toBeGreaterThan(0);
      expect((before['search needle-long'] as unknown[][])[0]!.length).toBe(3);
      expect((before['documents snapshot'] as unknown[]).length).toBe(40);
      await store.sealer.catchUp(later);
      const bytes = await store.storageBytes();
      expect(bytes.segments).toBeGreaterThan(10);
      // The running run stays hot; the finished ones are sealed whole, hot rows gone.
      expect(await store.hot.segmentsOf(runKey(PIPELINE, 'live'))).toEqual([]);
      for (const key of KEYS.slice(0, 5)) {
        const records = await store.hot.segmentsOf(key);
        expect(records.length).toBeGreaterThan(0);
        expect(records.every((record) => record.hotDropped)).toBe(true);
        expect(
          (await store.hot.rowsToSeal(records[0]!.streamId, records[0]!.firstSeq - 1, 10)).length,
        ).toBe(0);
      }
      const after = await readEverything(store);
      for (const name of Object.keys(before)) expect(after[name], name).toEqual(before[name]);
      // The same from a store opened afresh on the same files, with nothing cached.
      await store.close();
      const reopened = await open();
      expect(await readEverything(reopened)).toEqual(before);
    });

    it('does not seal a run until its search index has caught up with it', async () => {
      const store = await open();
      await store.appendLog(PIPELINE, 'r', [{ text: 'one\ntwo\n' }]);
      await store.putRun(PIPELINE, 'r', { status: 'success' });
      await store.sealer.catchUp(later);
      expect(await store.hot.segmentsOf(runKey(PIPELINE, 'r'))).toEqual([]);
      await indexAll(store);
      await store.sealer.catchUp(later);
      expect(await store.hot.segmentsOf(runKey(PIPELINE, 'r'))).toHaveLength(1);
    });

    it('keeps appends that come after sealing, and seals them in a segment of their own', async () => {
      const store = await open();
      await store.appendLog(PIPELINE, 'r', [{ text: 'one\ntwo\n' }]);
      await store.putRun(PIPELINE, 'r', { status: 'success' });
      await indexAll(store);
      await store.sealer.catchUp(later);
      await store.appendLog(PIPELINE, 'r', [{ text: 'late\n', id: 'late-1' }]);
      const entries = await store.readEntries(runKey(PIPELINE, 'r'), { afterSeq: 0, limit: 100 });
      expect(entries.map((e) => e.text ?? e.kind)).toEqual([
        'status',
        'one\ntwo\n',
        'status',
        'late\n',
      ]);
      await indexAll(store);
      await store.sealer.catchUp(later);
      expect(await store.hot.segmentsOf(runKey(PIPELINE, 'r'))).toHaveLength(2);
      expect(await store.readEntries(runKey(PIPELINE, 'r'), { afterSeq: 0, limit: 100 })).toEqual(
        entries,
      );
      expect(await store.readLog(runKey(PIPELINE, 'r'), 0, 100)).toHaveLength(2);
      expect(await store.seqOfProducerId(runKey(PIPELINE, 'r'), 'late-1')).toBe(4);
    });

    it('removes a deleted run’s segments with it', async () => {
      const store = await open();
      await writeHistory(store);
      await indexAll(store);
      await store.sealer.catchUp(later);
      const files = (await segmentNames()).length;
      const records = await store.hot.segmentsOf(runKey(PIPELINE, 'run-2'));
      await store.deleteRun(PIPELINE, 'run-2');
      expect(await segmentNames()).toHaveLength(files - records.length);
      expect(await store.hot.segmentsOf(runKey(PIPELINE, 'run-2'))).toEqual([]);
      const bounds = await store.bounds(runKey(PIPELINE, 'run-2'));
      expect(
        await store.readEntries(runKey(PIPELINE, 'run-2'), { afterSeq: 0, limit: 10 }),
      ).toEqual([expect.objectContaining({ seq: bounds.lastSeq, kind: 'status' })]);
    });

    it('answers a corrupt block with an error naming the run, never with wrong text', async () => {
      const store = await open();
      await store.appendLog(PIPELINE, 'r', [{ text: 'precious line\n'.repeat(2000) }]);
      await store.putRun(PIPELINE, 'r', { status: 'success' });
      await indexAll(store);
      await store.sealer.catchUp(later);
      const [name] = await segmentNames();
      const segments = place.segments();
      const size = (await segments.size(name!))!;
      const bytes = Buffer.from(await segments.read(name!, 0, size));
      bytes[10] = bytes[10]! ^ 0xff;
      await segments.put(name!, bytes);
      await store.close();
      const reopened = await open();
      const read = reopened.readEntries(runKey(PIPELINE, 'r'), { afterSeq: 0, limit: 10 });
      await expect(read).rejects.toMatchObject({ code: 'TW_SEGMENT_UNREADABLE' });
      await expect(read).rejects.toThrow(/run etl\.nightly\/r: sealed segment .* checksum/);
      await segments.remove(name!);
      await segments.close();
      await expect(reopened.readLog(runKey(PIPELINE, 'r'), 0, 10)).rejects.toThrow(
        /run etl\.nightly\/r: sealed segment .* missing/,
      );
    });

    for (const step of ['read', 'written', 'verified', 'recorded', 'dropped'] as SealStep[]) {
      it(`loses and duplicates nothing when sealing stops after "${step}"`, async () => {
        const crashing = await open({
          onStep: (at) => {
            if (at === step) throw new Error(`stopped after ${step}`);
          },
        });
        await writeHistory(crashing);
        await indexAll(crashing);
        const before = await readEverything(crashing);
        await expect(crashing.sealer.catchUp(later)).rejects.toThrow(`stopped after ${step}`);
        // Whatever was left, the store reads the same.
        expect(await readEverything(crashing)).toEqual(before);
        await crashing.close();
        const store = await open();
        await store.sealer.catchUp(later);
        expect(await readEverything(store)).toEqual(before);
        // A file of the interrupted seal that no record names is swept, once old enough.
        await store.sealer.sweep(0);
        const named = new Set<string>();
        for (const key of KEYS) {
          for (const record of await store.hot.segmentsOf(key)) named.add(record.name);
        }
        expect((await segmentNames()).length).toBe(named.size);
      });
    }
  });
}
