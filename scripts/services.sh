#!/usr/bin/env bash
# Brings up, on loopback, the real services the test suite uses, installing from Debian's
# packages whatever is missing. Idempotent: a service already up is left as it is.
#   ActiveMQ with STOMP on 127.0.0.1:61613 (the STOMP source's tests)
# and installs Chromium (/usr/bin/chromium) for the dashboard's browser tests (playwright-core).
# Recipe and pitfalls: docs/SERVICES.md.
set -euo pipefail

STOMP_PORT=61613
INSTANCE=/etc/activemq/instances-available/main

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

install_missing() {
  local missing=()
  [ -x /etc/init.d/activemq ] && [ -f "$INSTANCE/activemq.xml" ] || missing+=(activemq)
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  if ((${#missing[@]} > 0)); then
    echo "services: installing ${missing[*]} from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    if ((APT_UPDATED == 0)); then
      apt-get update -qq
      APT_UPDATED=1
    fi
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  fi
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

ensure_chromium() {
  # The dashboard's browser tests drive Debian's Chromium; no browser is downloaded by npm.
  [ -x /usr/bin/chromium ] || install_missing
  [ -x /usr/bin/chromium ] || { echo "services: /usr/bin/chromium is missing" >&2; return 1; }
}

ensure_chromium
start_activemq
