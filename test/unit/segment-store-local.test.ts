import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalSegmentStore } from '../../src/store/segment-store.js';
import { segmentStoreContract } from './segment-store.contract.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function fresh(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-segments-'));
  dirs.push(dir);
  return dir;
}

segmentStoreContract('local directory', async () => new LocalSegmentStore(fresh()));

describe('LocalSegmentStore', () => {
  it('leaves no temporary file beside the objects it put', async () => {
    const dir = fresh();
    const store = new LocalSegmentStore(dir);
    await store.put('7/1-9-a.tws', Buffer.from('segment'));
    expect(readdirSync(join(dir, '7'))).toEqual(['1-9-a.tws']);
  });
});
