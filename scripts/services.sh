#!/usr/bin/env bash
# Brings up, on loopback, the real services the test suite uses, installing from Debian's
# packages whatever is missing. Idempotent: a service already up is left as it is.
#   ActiveMQ with STOMP on 127.0.0.1:61613 (the STOMP source's tests)
#   Redis on 127.0.0.1:6379, no persistence (the Redis bus's tests)
#   PostgreSQL on 127.0.0.1:5432, user postgres, trust (the PostgreSQL store's tests)
#   S3-compatible storage on 127.0.0.1:4569, bucket tailwater-test (s3rver, from npm: the
#   S3 segment store's tests)
# and installs Chromium (/usr/bin/chromium) for the dashboard's browser tests (playwright-core).
# With --peers it also installs nchan (libnginx-mod-nchan) and Pushpin, the peers of
# `npm run bench -- peers` (bench/peers.ts), which starts its own instances of them on free
# loopback ports, fresh for each measurement.
# Recipe and pitfalls: docs/SERVICES.md.
set -euo pipefail

STOMP_PORT=61613
INSTANCE=/etc/activemq/instances-available/main
REDIS_PORT=6379
REDIS_DIR=/var/lib/tailwater-redis
S3_PORT=4569
S3_DIR=/var/lib/tailwater-s3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for_port() { # port seconds what logfile
  local deadline=$((SECONDS + $2))
  until port_open "$1"; do
    if ((SECONDS >= deadline)); then
      echo "services: $3 did not open 127.0.0.1:$1 within $2 s" >&2
      [ -n "${4:-}" ] && [ -f "$4" ] && tail -n 60 "$4" >&2
      return 1
    fi
    sleep 0.2
  done
}

APT_UPDATED=0

apt_install() { # package...
  echo "services: installing $* from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  if ((APT_UPDATED == 0)); then
    apt-get update -qq
    APT_UPDATED=1
  fi
  apt-get install -y -q --no-install-recommends "$@" >/dev/null
}

install_missing() {
  local missing=()
  [ -x /etc/init.d/activemq ] && [ -f "$INSTANCE/activemq.xml" ] || missing+=(activemq)
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  [ -x /usr/bin/redis-server ] && [ -x /usr/bin/redis-cli ] || missing+=(redis-server)
  if ((${#missing[@]} > 0)); then apt_install "${missing[@]}"; fi
}

configure_activemq() {
  # The package's instance has no STOMP connector: add one, on loopback only.
  if ! grep -q 'name="stomp"' "$INSTANCE/activemq.xml"; then
    sed -i "s#\(<transportConnector name=\"openwire\"[^>]*/>\)#\1\n            <transportConnector name=\"stomp\" uri=\"stomp://127.0.0.1:${STOMP_PORT}?transport.hbGracePeriodMultiplier=2\"/>#" \
      "$INSTANCE/activemq.xml"
  fi
  # A per-instance options file replaces the package defaults, so it starts from them.
  cat >"$INSTANCE/options" <<OPTIONS
. /usr/share/activemq/activemq-options
STARTTIME=0
ACTIVEMQ_OPTS="-Xms64M -Xmx256M -Dorg.apache.activemq.UseDedicatedTaskRunner=true"
ACTIVEMQ_OUT=/var/lib/activemq/main/console.log
OPTIONS
  ln -sfn "$INSTANCE" /etc/activemq/instances-enabled/main
  mkdir -p /var/lib/activemq/main
  chown -R activemq:activemq /var/lib/activemq/main 2>/dev/null || true
}

start_activemq() {
  if port_open "$STOMP_PORT"; then return 0; fi
  install_missing
  configure_activemq
  # "(failed?)" is printed with STARTTIME=0 even when it starts: the port decides.
  /etc/init.d/activemq start >/dev/null 2>&1 || true
  wait_for_port "$STOMP_PORT" 60 ActiveMQ /var/lib/activemq/main/console.log
  echo "services: ActiveMQ STOMP on 127.0.0.1:${STOMP_PORT}"
}

# PostgreSQL (the PostgreSQL store's tests): a cluster of its own for the tests, owned by the
# postgres user (the server refuses to run as root), on 127.0.0.1 only. fsync is off (a crash of
# the machine may lose this throw-away data; a crash of a process loses nothing: commits still
# write the WAL to the kernel before they return). Recipe: docs/SERVICES.md.
PG_PORT=5432
PG_ROOT=/var/lib/tailwater-test
PG_DATA=$PG_ROOT/pg

pg_bin() { # the newest installed server's bin directory
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$dir" ] && [ -x "$dir/postgres" ] && echo "$dir"
}

as_postgres() { su postgres -s /bin/sh -c "$1"; }

start_postgres() {
  if port_open "$PG_PORT"; then return 0; fi
  if ! pg_bin >/dev/null; then
    # Only when the server is missing: installing the package upgrades one that is there.
    apt_install postgresql
  fi
  local bin version
  bin=$(pg_bin)
  version=$("$bin/postgres" --version | sed -E 's/.* ([0-9]+)[.].*/\1/')
  mkdir -p "$PG_ROOT"
  # A cluster made by another major version cannot be started by this one: it is test data.
  if [ -f "$PG_DATA/PG_VERSION" ] && [ "$(cat "$PG_DATA/PG_VERSION")" != "$version" ]; then
    rm -rf "$PG_DATA"
  fi
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    rm -rf "$PG_DATA"
    install -d -o postgres -g postgres -m 700 "$PG_DATA"
    as_postgres "'$bin/initdb' -D '$PG_DATA' -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync" \
      >"$PG_ROOT/initdb.log" 2>&1 || {
      echo "services: initdb failed" >&2
      tail -n 60 "$PG_ROOT/initdb.log" >&2
      return 1
    }
  fi
  chown -R postgres:postgres "$PG_DATA"
  # -w waits for it to accept connections; the port decides all the same.
  as_postgres "'$bin/pg_ctl' -D '$PG_DATA' -l '$PG_DATA/pg.log' -w -t 60 -o \"-c listen_addresses=127.0.0.1 -p $PG_PORT -k '$PG_DATA' -c fsync=off -c max_connections=200\" start" \
    >/dev/null 2>&1 || true
  wait_for_port "$PG_PORT" 60 PostgreSQL "$PG_DATA/pg.log"
  echo "services: PostgreSQL $version on 127.0.0.1:${PG_PORT} (user postgres, no password)"
}

redis_pong() { [ -x /usr/bin/redis-cli ] && [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

start_redis() {
  if redis_pong; then return 0; fi
  install_missing
  mkdir -p "$REDIS_DIR"
  # Not Debian's /etc/redis/redis.conf (it persists to disk): loopback, nothing saved.
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --save '' --appendonly no \
    --dir "$REDIS_DIR" --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/redis.log" ||
    { tail -n 60 "$REDIS_DIR/redis.log" >&2 2>/dev/null; return 1; }
  local deadline=$((SECONDS + 20))
  until redis_pong; do
    if ((SECONDS >= deadline)); then
      echo "services: Redis did not answer PONG on 127.0.0.1:${REDIS_PORT} within 20 s" >&2
      [ -f "$REDIS_DIR/redis.log" ] && tail -n 60 "$REDIS_DIR/redis.log" >&2
      return 1
    fi
    sleep 0.2
  done
  echo "services: Redis on 127.0.0.1:${REDIS_PORT}"
}

ensure_chromium() {
  # The dashboard's browser tests drive Debian's Chromium; no browser is downloaded by npm.
  [ -x /usr/bin/chromium ] || install_missing
  [ -x /usr/bin/chromium ] || { echo "services: /usr/bin/chromium is missing" >&2; return 1; }
}

# S3 (the sealed segments' object storage): s3rver, a devDependency, so nothing to install.
# Its data directory is emptied at each start: only tests write to it.
start_s3() {
  if port_open "$S3_PORT"; then return 0; fi
  rm -rf "$S3_DIR" && mkdir -p "$S3_DIR/data"
  setsid nohup node "$ROOT/node_modules/s3rver/bin/s3rver.js" -d "$S3_DIR/data" -a 127.0.0.1 \
    -p "$S3_PORT" --silent --configure-bucket tailwater-test >"$S3_DIR/s3rver.log" 2>&1 </dev/null &
  wait_for_port "$S3_PORT" 30 s3rver "$S3_DIR/s3rver.log"
}

ensure_chromium
start_s3
start_activemq
start_redis
start_postgres

# nginx (the fleet's end-to-end tests): only the binary. The tests run their own nginx processes
# (`nginx -c <conf> -p <dir>`, docs/nginx.conf) on free loopback ports; no system nginx is
# started, and one the package's install started is stopped again.
ensure_nginx() {
  [ -x /usr/sbin/nginx ] && return 0
  apt_install nginx
  [ -f /run/nginx.pid ] && /usr/sbin/nginx -s quit 2>/dev/null || true
  [ -x /usr/sbin/nginx ] || { echo "services: /usr/sbin/nginx is missing" >&2; return 1; }
}

ensure_nginx

# nchan and Pushpin (--peers): only the packages. Debian's pushpin package enables a system
# service on 0.0.0.0:7999; one that its install started is stopped again.
ensure_peers() {
  local missing=()
  [ -f /usr/lib/nginx/modules/ngx_nchan_module.so ] || missing+=(libnginx-mod-nchan)
  [ -x /usr/bin/pushpin ] || missing+=(pushpin)
  ((${#missing[@]} == 0)) && return 0
  apt_install "${missing[@]}"
  [ -x /etc/init.d/pushpin ] && /etc/init.d/pushpin stop >/dev/null 2>&1 || true
  [ -f /usr/lib/nginx/modules/ngx_nchan_module.so ] && [ -x /usr/bin/pushpin ] ||
    { echo "services: nchan or Pushpin is missing after installing them" >&2; return 1; }
}

if [ "${1:-}" = "--peers" ]; then ensure_peers; fi
