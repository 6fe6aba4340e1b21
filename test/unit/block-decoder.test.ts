import { crc32 } from 'node:zlib';
import { afterAll, describe, expect, test } from 'vitest';
import type { EntryRow } from '../../src/store/entry-row.js';
import { BlockDecoder } from '../../src/store/block-decoder.js';
import type { BlockInfo, DecodedBlock } from '../../src/store/segment-format.js';
import { SegmentCorrupt, buildSegment, decodeBlock } from '../../src/store/segment-format.js';
import { Compressor, decompress } from '../../src/store/zstd.js';

// A catch-up's blocks are decoded on a worker that quotes each log text as JSON from its bytes
// (block-decoder.ts). What it hands back must be exactly JSON.stringify of the text the block
// holds, for blocks sealed today (which list their control characters and line feeds) and for
// blocks sealed before those columns existed.

const TEXTS = [
  'plain line\nanother\n',
  'say "hi" \\ C:\\new\\table\n',
  'at x\r\n\tat y\r\n',
  '\u001b[31mred\u001b[0m and a bell \u0007 and nul \u0000\n',
  'ünïcödé 😀 \u2028 \u007f \u0080\n',
  `${'long '.repeat(3000)}\n`,
  'no line feed at all',
  '',
];

function rows(): EntryRow[] {
  const out: EntryRow[] = [];
  let offset = 0;
  for (let seq = 1; seq <= 40; seq += 1) {
    const isLog = seq % 7 !== 0;
    const body = isLog ? TEXTS[seq % TEXTS.length]! : JSON.stringify({ n: seq, 'q"': '\n' });
    out.push({
      seq,
      time: 1_765_000_000_000 + seq,
      kind: isLog ? 'log' : 'status',
      step: null,
      correlation_id: null,
      producer_id: null,
      log_offset: isLog ? offset : null,
      body,
      extra: null,
    });
    if (isLog) offset += Buffer.byteLength(body, 'utf8');
  }
  return out;
}

const compressor = new Compressor();
const decoder = new BlockDecoder();
afterAll(async () => {
  await Promise.all([compressor.close(), decoder.close()]);
});

async function sealedBlocks(): Promise<Array<{ info: BlockInfo; compressed: Buffer }>> {
  const { file, footer } = await buildSegment(
    { rows: rows(), logLine: 3, logOffset: 0, docs: [], textOf: () => '' },
    { blockBytes: 4096, level: 3 },
    compressor,
  );
  return footer.blocks.map((info) => ({
    info,
    compressed: file.subarray(info.at, info.at + info.length),
  }));
}

/** The same block as it was sealed before its columns listed control characters and feeds. */
async function withoutNewColumns(info: BlockInfo, compressed: Buffer) {
  const raw = decompress(compressed);
  const at = 4 + raw.readUInt32LE(0);
  const columns = JSON.parse(raw.toString('utf8', 4, at)) as Record<string, unknown>;
  expect(columns).toHaveProperty('e');
  expect(columns).toHaveProperty('n');
  delete columns['e'];
  delete columns['n'];
  const json = Buffer.from(JSON.stringify(columns), 'utf8');
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32LE(json.length);
  const older = Buffer.concat([prefix, json, raw.subarray(at)]);
  const again = await compressor.compress(older, 3);
  const olderInfo = { ...info, length: again.length, crc: crc32(again), rawLength: older.length };
  return { info: olderInfo, compressed: again };
}

function expectQuotedAsJson(block: DecodedBlock, plain: DecodedBlock): void {
  let logRows = 0;
  for (let i = 0; i < plain.count; i += 1) {
    const row = plain.row(i)!;
    expect(block.row(i)).toEqual(row);
    if (row.log_offset === null) {
      expect(block.quotedText(i)).toBeUndefined();
      continue;
    }
    logRows += 1;
    expect(block.quotedText(i)!.toString('utf8')).toBe(JSON.stringify(row.body));
  }
  expect(logRows).toBeGreaterThan(0);
  expect(block.lines).toEqual(plain.lines);
}

describe('BlockDecoder', () => {
  test('quotes each log text of a block sealed today exactly as JSON.stringify does', async () => {
    const blocks = await sealedBlocks();
    expect(blocks.length).toBeGreaterThan(3);
    for (const { info, compressed } of blocks) {
      expectQuotedAsJson(await decoder.decode(info, compressed), decodeBlock(info, compressed));
    }
  });

  test('quotes an older block (no control characters or feeds listed) the same', async () => {
    for (const { info, compressed } of await sealedBlocks()) {
      const older = await withoutNewColumns(info, compressed);
      const block = await decoder.decode(older.info, older.compressed);
      expectQuotedAsJson(block, decodeBlock(info, compressed));
      expect(decodeBlock(older.info, older.compressed).lines).toEqual(block.lines);
    }
  });

  test('counts the lines before each row from the feeds column, checked against the footer', async () => {
    const { info, compressed } = (await sealedBlocks())[0]!;
    const block = decodeBlock(info, compressed);
    let line = info.logLine;
    for (let i = 0; i < block.count; i += 1) {
      expect(block.lines[i]).toBe(line);
      const row = block.row(i)!;
      if (row.log_offset !== null) line += row.body.split('\n').length - 1;
    }
    expect(line - info.logLine).toBe(info.logLines);
    const wrong = { ...info, logLines: info.logLines + 1 };
    expect(() => decodeBlock(wrong, compressed)).toThrow(SegmentCorrupt);
    await expect(decoder.decode(wrong, compressed)).rejects.toThrow(/not whole/);
  });
});
