import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { BoundedJsonReader, RawJson } from '../../src/model/bounded-json.js';
import type { JsonLimits } from '../../src/model/bounded-json.js';
import { TailwaterError } from '../../src/model/errors.js';

// The reader's answer for a body fed in the given pieces: the value, or the error code.
async function read(
  body: string | Buffer,
  limits: JsonLimits,
  cuts: number[] = [],
): Promise<{ value?: unknown; code?: string; message?: string }> {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const reader = new BoundedJsonReader(limits);
  try {
    let at = 0;
    for (const cut of [...new Set(cuts)].sort((a, b) => a - b)) {
      if (cut <= at || cut >= bytes.length) continue;
      reader.feed(bytes.subarray(at, cut));
      at = cut;
    }
    reader.feed(bytes.subarray(at));
    return { value: await reader.finish() };
  } catch (error) {
    if (!(error instanceof TailwaterError)) throw error;
    return { code: error.code, message: error.message };
  }
}

const plain: JsonLimits = { maxDepth: 64, maxValues: 1_000_000 };

const listLimits = (overrides: Partial<NonNullable<JsonLimits['list']>> = {}): JsonLimits => ({
  maxDepth: 64,
  maxValues: 1000,
  list: {
    key: 'events',
    maxItems: 1000,
    maxItemBytes: 70_000,
    rawField: 'data',
    tooManyItems: (count) => new TailwaterError('TW_BATCH_TOO_LARGE', `too many: ${count}`),
    itemTooLarge: (index, bytes) =>
      new TailwaterError('TW_EVENT_TOO_LARGE', `item ${index} is ${bytes} bytes`),
    ...overrides,
  },
});

/** The reader's list value with each raw field turned back into its value. */
function unraw(value: unknown): unknown {
  const events = (value as { events?: unknown }).events;
  if (!Array.isArray(events)) return value;
  return {
    ...(value as object),
    events: events.map((item: unknown) => {
      if (item === null || typeof item !== 'object' || !('data' in item)) return item;
      const data = (item as { data: unknown }).data;
      return { ...item, data: data instanceof RawJson ? JSON.parse(data.text) : data };
    }),
  };
}

describe('BoundedJsonReader without a list', () => {
  test('any JSON value reads as JSON.parse reads it, however the body is cut', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.jsonValue({ maxDepth: 6 }),
        fc.array(fc.nat({ max: 400 }), { maxLength: 6 }),
        async (value, cuts) => {
          const body = JSON.stringify(value, null, cuts.length % 2 === 0 ? undefined : 1);
          const answer = await read(body, plain, cuts);
          expect(answer.code).toBeUndefined();
          expect(answer.value).toEqual(JSON.parse(body));
        },
      ),
      { seed: 11, numRuns: 300 },
    );
  });

  test('a string that JSON.parse refuses is refused with TW_BAD_JSON, never accepted', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ maxLength: 40 }),
          fc.jsonValue({ maxDepth: 3 }).map((v) => {
            const s = JSON.stringify(v);
            return s.slice(0, Math.max(0, s.length - 1));
          }),
          fc
            .tuple(fc.jsonValue({ maxDepth: 3 }), fc.string({ maxLength: 5 }))
            .map(([v, junk]) => JSON.stringify(v) + junk),
        ),
        fc.array(fc.nat({ max: 60 }), { maxLength: 4 }),
        async (body, cuts) => {
          let valid = true;
          try {
            JSON.parse(body);
          } catch {
            valid = false;
          }
          const answer = await read(body, plain, cuts);
          if (valid) expect(answer.value).toEqual(JSON.parse(body));
          else expect(answer.code).toMatch(/^TW_BAD_JSON$/);
        },
      ),
      { seed: 12, numRuns: 1000 },
    );
  });

  test('strings of any length with escapes anywhere, however the body is cut, read as JSON.parse reads them', async () => {
    const piece = fc.oneof(
      fc.string({ unit: 'grapheme', minLength: 0, maxLength: 70 }),
      fc.constantFrom('"', '\\', '\n', '\u2028', '\\"', '/'),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(piece, { minLength: 1, maxLength: 8 }).map((parts) => parts.join('')),
        fc.array(fc.nat({ max: 200 }), { maxLength: 4 }),
        async (text, cuts) => {
          const body = JSON.stringify({ text, after: 'x' });
          expect((await read(body, plain, cuts)).value).toEqual({ text, after: 'x' });
        },
      ),
      { seed: 15, numRuns: 1000 },
    );
    // The case the fuzz suite found: an escape right at the end of the first 32 bytes of a string.
    for (let at = 25; at < 40; at += 1) {
      const text = `${'a'.repeat(at)}"-`;
      expect((await read(JSON.stringify({ text, id: 'x' }), plain)).value).toEqual({
        text,
        id: 'x',
      });
    }
  });

  test('an empty or blank body is TW_BAD_JSON "empty"', async () => {
    for (const body of ['', '  \n']) {
      const answer = await read(body, plain);
      expect(answer.code).toBe('TW_BAD_JSON');
      expect(answer.message).toMatch(/empty/);
    }
  });

  test('nesting one level past maxDepth is refused while the body is still arriving', async () => {
    const reader = new BoundedJsonReader({ maxDepth: 64, maxValues: 1000 });
    expect(() => reader.feed(Buffer.from('['.repeat(64)))).not.toThrow();
    expect(() => reader.feed(Buffer.from('['))).toThrow(/nests deeper than 64/);
  });

  test('a body of exactly maxDepth levels is read', async () => {
    const body = '['.repeat(64) + ']'.repeat(64);
    expect((await read(body, plain)).value).toEqual(JSON.parse(body));
  });

  test('values past maxValues are refused as the body arrives, before it is parsed', async () => {
    const reader = new BoundedJsonReader({ maxDepth: 8, maxValues: 1000 });
    // The top-level array itself is the first value.
    reader.feed(Buffer.from(`[${'0,'.repeat(998)}`));
    expect(() => reader.feed(Buffer.from('0,0'))).toThrow(/more than 1000 values/);
  });

  test('broken UTF-8 is TW_BAD_UTF8, not replaced', async () => {
    const body = Buffer.concat([
      Buffer.from('{"a":"'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}'),
    ]);
    expect((await read(body, plain)).code).toBe('TW_BAD_UTF8');
  });

  test('a UTF-8 character cut between two chunks reads whole', async () => {
    const body = Buffer.from('{"a":"例え"}', 'utf8');
    for (let cut = 1; cut < body.length; cut += 1) {
      expect((await read(body, plain, [cut])).value).toEqual({ a: '例え' });
    }
  });
});

describe('BoundedJsonReader with a list', () => {
  const event = fc.record(
    {
      kind: fc.string({ maxLength: 8 }),
      data: fc.jsonValue({ maxDepth: 4 }),
      step: fc.string({ maxLength: 8 }),
    },
    { requiredKeys: ['kind'] },
  );

  test('items read as JSON.parse reads them, each raw field as its exact text', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(event, { maxLength: 8 }),
        fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
        fc.array(fc.nat({ max: 600 }), { maxLength: 6 }),
        fc.boolean(),
        async (events, extra, cuts, pretty) => {
          const { events: _ignored, ...rest } = extra;
          const body = JSON.stringify({ ...rest, events }, null, pretty ? 2 : undefined);
          const answer = await read(body, listLimits(), cuts);
          expect(answer.code).toBeUndefined();
          const parsed = JSON.parse(body) as { events: Array<Record<string, unknown>> };
          const value = answer.value as { events: Array<Record<string, unknown>> };
          expect(value.events).toHaveLength(parsed.events.length);
          value.events.forEach((item, index) => {
            const { data, ...others } = item;
            const { data: expectedData, ...expectedOthers } = parsed.events[index]!;
            expect(others).toEqual(expectedOthers);
            if (expectedData === undefined) {
              expect(data).toBeUndefined();
            } else {
              expect(data).toBeInstanceOf(RawJson);
              expect(JSON.parse((data as RawJson).text)).toEqual(expectedData);
            }
          });
          expect({ ...value, events: [] }).toEqual({ ...parsed, events: [] });
        },
      ),
      { seed: 13, numRuns: 400 },
    );
  });

  test('a batch body with random edits is refused, or read exactly as JSON.parse reads it', async () => {
    const edit = fc.record({
      at: fc.nat(),
      remove: fc.nat({ max: 3 }),
      insert: fc.string({ unit: fc.constantFrom(...'{}[],:" \\0e-.atx'.split('')), maxLength: 3 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(event, { minLength: 1, maxLength: 5 }),
        fc.array(edit, { minLength: 1, maxLength: 3 }),
        fc.array(fc.nat({ max: 300 }), { maxLength: 4 }),
        async (events, edits, cuts) => {
          let body = JSON.stringify({ events });
          for (const { at, remove, insert } of edits) {
            const i = at % (body.length + 1);
            body = body.slice(0, i) + insert + body.slice(i + remove);
          }
          let expected: unknown;
          let valid = true;
          try {
            expected = JSON.parse(body);
          } catch {
            valid = false;
          }
          const answer = await read(body, listLimits(), cuts);
          if (answer.code === undefined) {
            expect(valid, body).toBe(true);
            expect(unraw(answer.value)).toEqual(expected);
          }
        },
      ),
      { seed: 14, numRuns: 3000 },
    );
  });

  test('a raw field keeps numbers JSON.parse would round, digit for digit', async () => {
    const body =
      '{"events":[{"kind":"k","data":{"id":12345678901234567890,"x":0.1000000000000000055511}}]}';
    const value = (await read(body, listLimits())).value as { events: [{ data: RawJson }] };
    expect(value.events[0].data.text).toBe(
      '{"id":12345678901234567890,"x":0.1000000000000000055511}',
    );
  });

  test('the 1001st item is refused as soon as it starts, without reading the rest', async () => {
    const reader = new BoundedJsonReader(listLimits());
    reader.feed(Buffer.from(`{"events":[${'{},'.repeat(1000)}`));
    expect(() => reader.feed(Buffer.from('{}'))).toThrow(/too many: 1001/);
  });

  test('an item past maxItemBytes is refused while it is still arriving', async () => {
    const reader = new BoundedJsonReader(listLimits({ maxItemBytes: 1000 }));
    reader.feed(Buffer.from('{"events":[{"kind":"k","data":"'));
    expect(() => reader.feed(Buffer.from('x'.repeat(2000)))).toThrow(/item 0 is/);
  });

  test('separators of the list are checked: no leading, doubled or trailing comma', async () => {
    for (const body of [
      '{"events":[,{}]}',
      '{"events":[{},,{}]}',
      '{"events":[{},]}',
      '{"events":[{} {}]}',
      '{"events":[{}x]}',
    ]) {
      expect((await read(body, listLimits())).code, body).toBe('TW_BAD_JSON');
    }
  });

  test('the list key given twice is refused, as is a raw field given twice in one item', async () => {
    expect((await read('{"events":[],"events":[{}]}', listLimits())).code).toBe('TW_BAD_JSON');
    expect((await read('{"events":1,"events":[]}', listLimits())).code).toBe('TW_BAD_JSON');
    const twice = await read('{"events":[{"data":1,"data":2}]}', listLimits());
    expect(twice.code).toBe('TW_BAD_JSON');
    expect(twice.message).toMatch(/"data" is given twice/);
  });

  test('a key spelt with escapes is the same key', async () => {
    const value = (await read('{"ev\\u0065nts":[{"d\\u0061ta":[1]}]}', listLimits())).value as {
      events: [{ data: RawJson }];
    };
    expect(value.events[0].data).toEqual(new RawJson('[1]'));
  });

  test('an invalid raw field is refused even though nothing is built from it', async () => {
    const answer = await read('{"events":[{"kind":"k","data":[1,]}]}', listLimits());
    expect(answer.code).toBe('TW_BAD_JSON');
  });

  test('20 MB of empty items is refused at the 1001st, having kept only what it read', async () => {
    const reader = new BoundedJsonReader(listLimits());
    reader.feed(Buffer.from('{"events":['));
    const piece = Buffer.from('{},'.repeat(20_000));
    let refused: unknown;
    let fed = 0;
    try {
      for (; fed < 20_000_000; fed += piece.length) reader.feed(piece);
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(TailwaterError);
    expect((refused as TailwaterError).code).toBe('TW_BATCH_TOO_LARGE');
    expect(fed).toBe(0); // the first piece already held the 1001st item
  });

  test('values outside the items count against maxValues; values inside items do not', async () => {
    const inside = `{"events":[{"data":[${'0,'.repeat(5000)}0]}]}`;
    expect((await read(inside, listLimits())).code).toBeUndefined();
    const outside = `{"junk":[${'0,'.repeat(5000)}0],"events":[]}`;
    expect((await read(outside, listLimits())).code).toBe('TW_BODY_TOO_LARGE');
  });
});
