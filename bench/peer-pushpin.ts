/**
 * Pushpin (Debian's `pushpin`) as a peer of the streaming benchmarks: its runner and the
 * processes it starts (condure for client connections, zurl for requests to the origin,
 * pushpin-proxy, pushpin-handler), configured in a fresh directory on free loopback ports, with
 * bench/grip-origin.ts as the origin that puts each viewer on a channel.
 *
 * Settings are the package's defaults (/etc/pushpin/pushpin.conf) except: every port on
 * loopback and free, warnings only in its logs (no line per publish), and no delivery shaping
 * (`message_rate=0`) with a queue far above the load. Its default shaping delivers 2,500 messages
 * (one item to one viewer) a second: at 200 viewers most entries arrived seconds late or not at
 * all. Any rate above 0 is worse than it sounds here: its timer is restarted by every publish, so
 * publishes coming faster than its 25 ms batch interval held every delivery back until they
 * stopped (measured: entries published at 200/s arrived 0.2–2.1 s late, instead of 2–5 ms).
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Proc } from './procs.js';
import {
  asProc,
  asTreeProc,
  freePort,
  spawnLimited,
  spawnNode,
  waitForLine,
  waitForPort,
} from './procs.js';

export const PUSHPIN = '/usr/bin/pushpin';
const ORIGIN = fileURLToPath(new URL('./grip-origin.ts', import.meta.url));

/** `pid` is the runner's: condure, zurl, the proxy and the handler are below it. */
export interface PushpinProc extends Proc {
  /** Where viewers connect (condure). */
  port: number;
  /** The handler's HTTP publish endpoint. */
  publishUrl: string;
}

interface Ports {
  http: number;
  origin: number;
  publish: number;
  pushIn: number;
  pushInSub: number;
  command: number;
}

export function pushpinConfig(dir: string, ports: Ports): string {
  const run = join(dir, 'run');
  return `[global]
include={libdir}/internal.conf
rundir=${run}
ipc_prefix=pushpin-
port_offset=0
stats_connection_ttl=120

[runner]
services=condure,zurl,pushpin-proxy,pushpin-handler
http_port=127.0.0.1:${ports.http}
logdir=${join(dir, 'log')}
log_level=2
client_buffer_size=8192
client_maxconn=50000
condure_bin=condure
zurl_bin=zurl

[proxy]
routesfile=${join(dir, 'routes')}
# The package's internal.conf points the proxy at a system zurl (/var/run/zurl): use the runner's.
zurl_out_specs=ipc://{rundir}/{ipc_prefix}zurl-in
zurl_out_stream_specs=ipc://{rundir}/{ipc_prefix}zurl-in-stream
zurl_in_specs=ipc://{rundir}/{ipc_prefix}zurl-out
debug=false
auto_cross_origin=false
accept_x_forwarded_protocol=false
set_x_forwarded_protocol=proto-only
x_forwarded_for=
x_forwarded_for_trusted=
orig_headers_need_mark=
accept_pushpin_route=false
log_from=false
log_user_agent=false
sig_iss=pushpin
sig_key=changeme
upstream_key=
updates_check=off
organization_name=

[handler]
push_in_spec=tcp://127.0.0.1:${ports.pushIn}
push_in_sub_specs=tcp://127.0.0.1:${ports.pushInSub}
push_in_sub_connect=false
push_in_http_addr=127.0.0.1
push_in_http_port=${ports.publish}
push_in_http_max_headers_size=10000
push_in_http_max_body_size=1000000
stats_spec=ipc://{rundir}/{ipc_prefix}stats
command_spec=tcp://127.0.0.1:${ports.command}
message_rate=0
message_hwm=10000000
message_wait=5000
id_cache_ttl=60
connection_subscription_max=20
subscription_linger=60
stats_subscription_ttl=60
stats_report_interval=10
stats_format=tnetstring
`;
}

/**
 * One Pushpin and its origin (fresh: nothing subscribed). Its ports are chosen free but bound
 * only once it starts; in one run of the benchmark it exited at start (most likely a chosen
 * port taken in between, not confirmed), so it is started again on other ports, up to three
 * times.
 */
export async function startPushpin(dir: string): Promise<PushpinProc> {
  if (!existsSync(PUSHPIN)) {
    throw new Error(`Pushpin is not installed (${PUSHPIN}): bash scripts/services.sh --peers`);
  }
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startOnce(join(dir, `attempt-${attempt}`));
    } catch (error) {
      if (attempt >= 3) throw error;
    }
  }
}

async function startOnce(dir: string): Promise<PushpinProc> {
  mkdirSync(join(dir, 'run'), { recursive: true });
  mkdirSync(join(dir, 'log'), { recursive: true });
  const ports: Ports = {
    http: await freePort(),
    origin: await freePort(),
    publish: await freePort(),
    pushIn: await freePort(),
    pushInSub: await freePort(),
    command: await freePort(),
  };
  writeFileSync(join(dir, 'routes'), `* 127.0.0.1:${ports.origin}\n`);
  const conf = join(dir, 'pushpin.conf');
  writeFileSync(conf, pushpinConfig(dir, ports));
  const originChild = spawnNode(['--import', 'tsx', ORIGIN], {
    env: { GRIP_ORIGIN_PORT: String(ports.origin) },
  });
  const origin = asProc(originChild);
  let runner: Proc | undefined;
  try {
    await waitForLine(originChild, /grip origin listening/);
    runner = asTreeProc(spawnLimited(PUSHPIN, [`--config=${conf}`]));
    await waitForPort(ports.http, runner, join(dir, 'log', 'pushpin-proxy.log'));
    await waitForPort(ports.publish, runner, join(dir, 'log', 'pushpin-handler.log'));
  } catch (error) {
    await runner?.stop();
    await origin.stop();
    throw error;
  }
  const pushpin = runner;
  return {
    child: pushpin.child,
    pid: pushpin.pid,
    port: ports.http,
    publishUrl: `http://127.0.0.1:${ports.publish}/publish/`,
    async stop() {
      await pushpin.stop();
      await origin.stop();
    },
  };
}
