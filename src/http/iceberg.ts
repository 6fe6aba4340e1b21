import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { FrameEncoder } from '../engine/frames.js';
import type { StartPosition } from '../engine/hub.js';
import type { Entry } from '../model/entry.js';
import { RAW_DATA } from '../model/entry.js';
import { topicKey } from '../model/stream-key.js';
import type { AppDeps } from './deps.js';
import { streamTo } from './native.js';
import { commentBytes, frameBytes } from './sse.js';

/**
 * The Iceberg table-commit dashboard of seed 001: `event: connected` with a clientId, then each
 * event of the configured topic as `id: <eventId>` / `event: iceberg-mutation` / the producer's
 * JSON. The seed kept no history; here a new dashboard first gets the latest few events, and
 * `Last-Event-ID` (an eventId) resumes exactly after that event.
 */
export const ICEBERG_PREFIX = '/compat/iceberg';

const frames = new WeakMap<Entry, Buffer>();

export class IcebergEncoder implements FrameEncoder {
  private readonly clientId = randomUUID();

  constructor(private readonly kind: string) {}

  open(): Buffer {
    // Byte for byte what the seed's server wrote, space included.
    return Buffer.from(`event: connected\ndata: {"clientId": "${this.clientId}"}\n\n`);
  }

  entry(entry: Entry): Buffer {
    let frame = frames.get(entry);
    if (!frame) {
      frame = frameBytes({
        // Ingest refuses line breaks in ids; the seq stands in should one get through anyway.
        id: entry.id !== undefined && !/[\r\n]/.test(entry.id) ? entry.id : String(entry.seq),
        event: this.kind,
        // The producer's JSON as received: big integers such as snapshotId stay exact.
        data: entry[RAW_DATA] ?? JSON.stringify(entry.data),
      });
      frames.set(entry, frame);
    }
    return frame;
  }

  /** The dashboard knows no control frames: it is told nothing, and never needs to be. */
  cursor(): null {
    return null;
  }

  gap(): null {
    return null;
  }

  /** A topic ends only when the server stops: close, and the EventSource reconnects. */
  end(): null {
    return null;
  }

  error(): null {
    return null;
  }

  heartbeat(): Buffer {
    return commentBytes('heartbeat');
  }
}

export async function icebergRoutes(
  app: FastifyInstance,
  { store, hub, settings }: AppDeps,
): Promise<void> {
  app.get(`${ICEBERG_PREFIX}/events`, async (request, reply) => {
    const key = topicKey(settings.icebergTopic);
    const header = request.headers['last-event-id'];
    const lastEventId = Array.isArray(header) ? header[0] : header;
    let start: StartPosition = { type: 'tail', count: settings.icebergReplayOnConnect };
    if (lastEventId) {
      // The eventId is the producer id the event was stored under; an event stored without one
      // was sent with its seq as the id.
      let seq = await store.seqOfProducerId(key, lastEventId);
      if (seq === undefined && /^\d{1,15}$/.test(lastEventId)) {
        const [entry] = await store.readEntries(key, {
          afterSeq: Number(lastEventId) - 1,
          limit: 1,
        });
        if (entry && entry.seq === Number(lastEventId) && entry.id === undefined) seq = entry.seq;
      }
      if (seq !== undefined) start = { type: 'after', seq };
    }
    await streamTo(
      hub,
      reply,
      key,
      start,
      { kinds: [settings.icebergKind] },
      new IcebergEncoder(settings.icebergKind),
    );
  });
}
