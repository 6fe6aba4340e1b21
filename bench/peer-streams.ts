/**
 * The peers of the streaming benchmarks as StreamServers: one channel of nchan or Pushpin with
 * the same viewers and producer as Tailwater's run (procs.ts's startStreamServer).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { NCHAN_MODULE, NGINX, startNchan } from './peer-nchan.js';
import { PUSHPIN, startPushpin } from './peer-pushpin.js';
import type { StreamServer } from './procs.js';

export type PeerTarget = { nchan: { workers: number } } | { pushpin: true };

const CHANNEL = 'bench';

/** The peers' programs this machine lacks. */
export function missingPeers(): string[] {
  return [
    ...(existsSync(NGINX) && existsSync(NCHAN_MODULE) ? [] : ['nchan']),
    ...(existsSync(PUSHPIN) ? [] : ['pushpin']),
  ];
}

/** Where a viewer of `channel` connects on a peer. */
export function peerPath(target: PeerTarget, channel: string): string {
  return 'nchan' in target ? `/sub/${channel}` : `/stream/${channel}`;
}

/** A fresh peer server (in a directory of its own under `dir`) with one channel to watch. */
export async function startPeerStream(target: PeerTarget, dir: string): Promise<StreamServer> {
  if ('nchan' in target) {
    const nchan = await startNchan(join(dir, 'nchan'), target.nchan.workers);
    return {
      server: nchan,
      port: nchan.port,
      appendUrl: `http://127.0.0.1:${nchan.port}/pub/${CHANNEL}`,
      path: peerPath(target, CHANNEL),
      peer: { to: 'nchan' },
    };
  }
  const pushpin = await startPushpin(join(dir, 'pushpin'));
  return {
    server: pushpin,
    port: pushpin.port,
    appendUrl: pushpin.publishUrl,
    path: peerPath(target, CHANNEL),
    peer: { to: 'pushpin', channel: CHANNEL },
    // Its handler queues at most 100 items per connection and drops the rest (PUBLISH_QUEUE_MAX
    // in its httpsession.cpp): two batches of 50 in flight keep it fed without losing any.
    queueLimit: {
      batch: Number(process.env['PP_BATCH'] ?? 50),
      ahead: Number(process.env['PP_AHEAD'] ?? 100),
    },
  };
}
