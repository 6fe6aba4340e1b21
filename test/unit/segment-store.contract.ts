import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SegmentStore } from '../../src/store/segment-store.js';
import { SegmentMissing } from '../../src/store/segment-store.js';

/**
 * The guarantees of the `SegmentStore` port (src/store/segment-store.ts), run against every
 * implementation through a factory that gives each test an empty store.
 */
export function segmentStoreContract(name: string, open: () => Promise<SegmentStore>): void {
  describe(`SegmentStore contract: ${name}`, () => {
    let store: SegmentStore;
    beforeEach(async () => {
      store = await open();
    });
    afterEach(async () => {
      await store.close();
    });

    const bytes = randomBytes(300_000);

    it('answers exactly the bytes asked for, from the start or from the end', async () => {
      await store.put('12/1-40-ab.tws', bytes);
      expect(await store.size('12/1-40-ab.tws')).toBe(bytes.length);
      expect(await store.read('12/1-40-ab.tws', 0, 10)).toEqual(bytes.subarray(0, 10));
      expect(await store.read('12/1-40-ab.tws', 123_456, 70_000)).toEqual(
        bytes.subarray(123_456, 193_456),
      );
      expect(await store.read('12/1-40-ab.tws', -16, 16)).toEqual(bytes.subarray(-16));
      // From 1000 bytes before the end, the first 984 of them (a footer before its trailer).
      expect(await store.read('12/1-40-ab.tws', -1000, 984)).toEqual(
        bytes.subarray(bytes.length - 1000, bytes.length - 16),
      );
      expect(await store.read('12/1-40-ab.tws', 0, bytes.length)).toEqual(bytes);
    });

    it('fails a read of a missing object or past its end, rather than answering less', async () => {
      await expect(store.read('nope/1-2-x.tws', 0, 10)).rejects.toBeInstanceOf(SegmentMissing);
      await store.put('short.tws', bytes.subarray(0, 100));
      await expect(store.read('short.tws', 50, 100)).rejects.toBeInstanceOf(SegmentMissing);
      await expect(store.read('short.tws', -200, 16)).rejects.toBeInstanceOf(SegmentMissing);
      expect(await store.size('nope/1-2-x.tws')).toBeUndefined();
    });

    it('removes an object, and removing one that is not there succeeds', async () => {
      await store.put('3/1-2-c.tws', bytes.subarray(0, 10));
      await store.remove('3/1-2-c.tws');
      expect(await store.size('3/1-2-c.tws')).toBeUndefined();
      await store.remove('3/1-2-c.tws');
      await expect(store.read('3/1-2-c.tws', 0, 1)).rejects.toBeInstanceOf(SegmentMissing);
    });

    it('lists objects by prefix in name order, a page after a name, with their time', async () => {
      const names = ['2/1-5-a.tws', '2/6-9-b.tws', '10/1-3-c.tws', '2/10-12-d.tws'];
      const before = Date.now() - 5_000;
      for (const name of names) await store.put(name, bytes.subarray(0, 64));
      const all = await store.list('');
      expect(all.map((o) => o.name)).toEqual([...names].sort());
      for (const object of all) {
        expect(object.modifiedAt).toBeGreaterThan(before);
        expect(object.modifiedAt).toBeLessThan(Date.now() + 5_000);
      }
      expect((await store.list('2/')).map((o) => o.name)).toEqual([
        '2/1-5-a.tws',
        '2/10-12-d.tws',
        '2/6-9-b.tws',
      ]);
      expect((await store.list('2/', '2/10-12-d.tws')).map((o) => o.name)).toEqual(['2/6-9-b.tws']);
    });

    it('refuses names it does not make, so none can climb out of its place', async () => {
      for (const bad of ['../x', 'a/../../b', '/abs', 'a b', 'a\\b', '']) {
        await expect(store.put(bad, bytes.subarray(0, 1))).rejects.toThrow(
          /not one this store makes/,
        );
      }
    });
  });
}
