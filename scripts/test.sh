#!/usr/bin/env bash
# `npm test`: the whole suite. The services (scripts/services.sh: installs from Debian's
# packages what is missing, starts them) come up while the build runs, and the lint (ESLint,
# Prettier, tsc) runs beside the tests: on two cores that is a minute and a half less than one
# after the other. Fails if any step fails; the lint's and the services' output is shown.
set -uo pipefail
cd "$(dirname "$0")/.."

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

bash scripts/services.sh >"$logs/services" 2>&1 &
services=$!

if ! npm run build; then
  wait "$services"
  exit 1
fi

npm run lint >"$logs/lint" 2>&1 &
lint=$!

if ! wait "$services"; then
  cat "$logs/services"
  echo "npm test: scripts/services.sh failed (above)" >&2
  wait "$lint"
  exit 1
fi
cat "$logs/services"

npx vitest run "$@"
tests=$?

wait "$lint"
linted=$?
cat "$logs/lint"
if [ "$linted" -ne 0 ]; then echo "npm test: the lint failed (above)" >&2; fi
if [ "$tests" -ne 0 ] || [ "$linted" -ne 0 ]; then exit 1; fi
