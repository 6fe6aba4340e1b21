/**
 * nginx with the nchan module (Debian's `libnginx-mod-nchan`) as a peer of the streaming
 * benchmarks: its own nginx master on a free loopback port, configured in a fresh directory, with
 * one channel per path (`/sub/<id>` for EventSource viewers, `/pub/<id>` to publish).
 *
 * Settings are nchan's defaults (messages kept in shared memory, 10 per channel) except what a
 * benchmark needs: no access log, open-file and connection limits raised, keep-alive publishers,
 * and `event: progress` on each frame so its frames carry what Tailwater's do.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Proc } from './procs.js';
import { asTreeProc, freePort, spawnLimited, waitForPort } from './procs.js';

export const NGINX = '/usr/sbin/nginx';
export const NCHAN_MODULE = '/usr/lib/nginx/modules/ngx_nchan_module.so';

export interface NchanProc extends Proc {
  port: number;
  /** nginx's worker processes. */
  workers: number;
}

export function nchanConfig(dir: string, port: number, workers: number): string {
  return `load_module ${NCHAN_MODULE};
worker_processes ${workers};
worker_rlimit_nofile 65536;
daemon off;
master_process on;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events {
  worker_connections 30000;
}
http {
  access_log off;
  client_body_temp_path ${join(dir, 'client_body')};
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:${port};
    location ~ ^/pub/(\\w+)$ {
      nchan_publisher;
      nchan_channel_id $1;
    }
    location ~ ^/sub/(\\w+)$ {
      nchan_subscriber eventsource;
      nchan_channel_id $1;
      nchan_eventsource_event progress;
    }
  }
}
`;
}

/** One nchan server with `workers` nginx workers (fresh: nothing buffered). */
export async function startNchan(dir: string, workers: number): Promise<NchanProc> {
  if (!existsSync(NCHAN_MODULE)) {
    throw new Error(`nchan is not installed (${NCHAN_MODULE}): bash scripts/services.sh --peers`);
  }
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, nchanConfig(dir, port, workers));
  const proc = asTreeProc(
    spawnLimited(NGINX, ['-c', conf, '-p', dir, '-e', join(dir, 'error.log')]),
  );
  try {
    await waitForPort(port, proc, join(dir, 'error.log'));
  } catch (error) {
    await proc.stop();
    throw error;
  }
  return { ...proc, port, workers };
}
