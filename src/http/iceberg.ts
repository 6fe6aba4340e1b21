import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { FrameEncoder, GapInfo } from '../engine/frames.js';
import type { StartPosition } from '../engine/hub.js';
import type { Entry } from '../model/entry.js';
import { topicResource } from '../model/scopes.js';
import { RAW_DATA } from '../model/entry.js';
import { SERVER_ID_PREFIX } from '../model/names.js';
import { topicKey } from '../model/stream-key.js';
import type { AppDeps } from './deps.js';
import { lastEventId } from './params.js';
import { commentBytes, frameBytes, streamTo } from './sse.js';

/**
 * The Iceberg table-commit dashboard (Spark commits → ActiveMQ → SSE → React; docs/API.md, "Iceberg dashboard"): `event: connected` with a clientId, then each
 * event of the configured topic as `id: <eventId>` / `event: iceberg-mutation` / the producer's
 * JSON. The seed kept no history; here a new dashboard first gets the latest few events, and
 * `Last-Event-ID` (an eventId) resumes exactly after that event. An event stored without an
 * eventId is sent with `seq:<seq>`, a form no producer id may take, so an id names one event
 * for ever; a Last-Event-ID the server cannot place gets `gap` and the latest events again.
 */
export const ICEBERG_PREFIX = '/compat/iceberg';

const frames = new WeakMap<Entry, Buffer>();

export class IcebergEncoder implements FrameEncoder {
  private readonly clientId = randomUUID();

  constructor(private readonly kind: string) {}

  open(): Buffer {
    // Byte for byte what the seed's server wrote, space included.
    return frameBytes({ event: 'connected', data: `{"clientId": "${this.clientId}"}` });
  }

  entry(entry: Entry): Buffer {
    let frame = frames.get(entry);
    if (!frame) {
      frame = frameBytes({
        id: eventIdOf(entry),
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

  /** The seed's dashboard listens for its own events only, so it ignores this; others may not. */
  gap(gap: GapInfo): Buffer {
    return frameBytes({ event: 'gap', data: JSON.stringify(gap) });
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

/** The SSE id of an event: its eventId (the producer id), or `seq:<seq>` if it has none. */
function eventIdOf(entry: Entry): string {
  return entry.id ?? `${SERVER_ID_PREFIX}${entry.seq}`;
}

export async function icebergRoutes(
  app: FastifyInstance,
  { hub, settings }: AppDeps,
): Promise<void> {
  const resource = () => topicResource(settings.icebergTopic);
  app.get(`${ICEBERG_PREFIX}/events`, { config: { resource } }, async (request, reply) => {
    const key = topicKey(settings.icebergTopic);
    const resumeAfter = lastEventId(request.headers);
    const replay = settings.icebergReplayOnConnect;
    const start: StartPosition = resumeAfter
      ? { type: 'afterProducerId', id: resumeAfter, tail: replay }
      : { type: 'tail', count: replay };
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
