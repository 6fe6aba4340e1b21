import { z } from 'zod';
import { entry, media, runStatus } from './api.js';

/**
 * The frames of a native stream (docs/API.md, "Streaming"; native.ts writes them). OpenAPI 3.1
 * has no type for Server-Sent Events, so the document shows the body as `text/event-stream`
 * whose frames are `StreamFrame`s: each frame below is an object of the SSE fields a client's
 * parser hands over, `id`, `event`, `retry`, with `data` the JSON the `data:` lines carry.
 */

const cursorId = z.string().meta({
  pattern: '^[0-9]+-[0-9a-f]{8}$',
  description: '`<seq>-<epoch>`: send it back as `Last-Event-ID` or `?after=`; treat it as opaque.',
});

export const endReasons = [
  'runFinished',
  'runDeleted',
  'idleTimeout',
  'maxDuration',
  'maxBytes',
  'shutdown',
  'tokenExpired',
] as const;

export const streamGap = z
  .union([
    z.object({ reason: z.literal('reset') }),
    z.object({ reason: z.literal('retention'), fromSeq: z.int().min(1), toSeq: z.int().min(1) }),
  ])
  .meta({
    id: 'StreamGap',
    description:
      '`reset`: the cursor is not one this server can place; the stream follows from its start. `retention`: those entries were deleted.',
  });

export const streamEnd = z
  .object({
    reason: z.enum(endReasons),
    status: runStatus.optional(),
    lastSeq: z.int().min(0),
  })
  .meta({
    id: 'StreamEnd',
    description: 'The stream ends; the server closes it after this frame.',
  });

export const streamError = z
  .object({ code: z.string(), message: z.string() })
  .meta({ id: 'StreamError', description: 'A failure after the stream opened; then close.' });

export const streamFrame = z
  .union([
    z
      .object({ retry: z.int().min(0) })
      .meta({ id: 'RetryFrame', description: 'The first frame: the reconnection delay (ms).' }),
    z
      .object({
        event: z.string().meta({ description: "The entry's kind." }),
        data: entry,
        id: cursorId,
      })
      .meta({ id: 'EntryFrame', description: 'One entry.' }),
    z
      .object({ event: z.literal('cursor'), data: z.object({}), id: cursorId })
      .meta({ id: 'CursorFrame', description: 'Entries up to this id were filtered out.' }),
    z.object({ event: z.literal('gap'), data: streamGap }).meta({ id: 'GapFrame' }),
    z.object({ event: z.literal('end'), data: streamEnd }).meta({ id: 'EndFrame' }),
    z.object({ event: z.literal('error'), data: streamError }).meta({ id: 'ErrorFrame' }),
  ])
  .meta({ id: 'StreamFrame' });

const FRAMING =
  'A Server-Sent Events stream (`text/event-stream; charset=utf-8`), answered at once. Each frame ' +
  'is `event:`, `retry:` and `data:` lines, then `id:` last, then a blank line; `data` is one ' +
  'line of JSON. The frames are `StreamFrame`s: a `retry` frame first, then `EntryFrame`s ' +
  '(`event` = the kind, `data` = the entry, `id` = `<seq>-<epoch>`), `CursorFrame`s, ' +
  '`GapFrame`s, and at most one `EndFrame` or `ErrorFrame`, after which the server closes. A ' +
  '`: heartbeat` comment comes when nothing else was sent for `heartbeatSeconds`. A body that ' +
  'closes without `end` was cut: reconnect with the last id (`Last-Event-ID`). Topics never end ' +
  'on their own. docs/API.md, "Streaming".';

/** A native stream's 200 answer. */
export const streamResponse = media(FRAMING, 'text/event-stream', streamFrame);
