import { describe, expect, it } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import {
  DOCUMENTS_PER_RUN,
  EMPTY_INDEX_STATE,
  MAX_RUN_POSITION,
  documentId,
  documentsOf,
} from '../../src/store/search-documents.js';

// How a run's entries become search documents (docs/SEARCH.md, "The index, and its lag").

let seq = 0;
const log = (text: string, offset: number): Entry => ({
  seq: ++seq,
  time: new Date().toISOString(),
  kind: 'log',
  text,
  offset,
});

describe('documentsOf', () => {
  it('holds an unfinished last line back, and gives it, whole, once its newline comes', () => {
    const first = documentsOf(1, EMPTY_INDEX_STATE, [log('one\ntw', 0)]);
    expect(first.documents.map((d) => [d.line, d.offset, d.text])).toEqual([[1, 0, 'one\n']]);
    expect(first.state).toMatchObject({ nextLine: 2, pendingOffset: 4, pendingText: 'tw' });
    const second = documentsOf(1, first.state, [log('o\nthree\n', 6)]);
    expect(second.documents.map((d) => [d.id, d.line, d.offset, d.text])).toEqual([
      [documentId(1, 1), 2, 4, 'two\nthree\n'],
    ]);
    expect(second.state).toMatchObject({ nextLine: 4, pendingText: '', documents: 2 });
  });

  it('cuts a line over 256 KiB into pieces that know where their line began', () => {
    const long = 'é'.repeat(300_000);
    const { documents, state } = documentsOf(3, EMPTY_INDEX_STATE, [log(`a\n${long}\n`, 0)]);
    expect(documents.map((d) => d.line)).toEqual([1, 2, 2]);
    expect(documents[1]).toMatchObject({ offset: 2, lineOffset: null, column: null });
    expect(documents[2]).toMatchObject({
      lineOffset: 2,
      column: documents[1]!.text.length,
      offset: 2 + Buffer.byteLength(documents[1]!.text),
    });
    expect(documents.map((d) => d.text).join('')).toBe(`a\n${long}\n`);
    expect(state).toMatchObject({ nextLine: 3, column: 0, pendingText: '' });
  });

  it('indexes nothing of a run whose ids would pass 2^53, and no more than a run may have', () => {
    expect(documentsOf(MAX_RUN_POSITION + 1, EMPTY_INDEX_STATE, [log('x\n', 0)]).documents).toEqual(
      [],
    );
    expect(Number.isSafeInteger(documentId(MAX_RUN_POSITION, DOCUMENTS_PER_RUN - 1))).toBe(true);
    const full = { ...EMPTY_INDEX_STATE, documents: DOCUMENTS_PER_RUN };
    expect(documentsOf(1, full, [log('x\n', 0)]).documents).toEqual([]);
  });
});
