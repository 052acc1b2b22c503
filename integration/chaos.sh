#!/usr/bin/env bash
# make chaos: attacks on a real lakegate server on a real PostgreSQL, on
# loopback, one line per attack with its figures (integration/chaos: each
# attack starts a server of its own from bin/lakegate and stops it after).
# Not part of make test. Needs LAKEGATE_TEST_DATABASE_URL (an admin URL;
# make chaos runs this under with-postgres.sh) and psql; loads 100,000
# readings (CHAOS_ROWS) into a database lakegate_chaos, dropped at the end.
# Arguments after GO name attacks to run (default: all of them).
set -euo pipefail
GO="${1:-go}"
shift || true
ROWS="${CHAOS_ROWS:-100000}"
admin="${LAKEGATE_TEST_DATABASE_URL:?set LAKEGATE_TEST_DATABASE_URL}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
base="${admin%%\?*}"; query=""; [[ "$admin" == *\?* ]] && query="?${admin#*\?}"
chaos_url="${base%/*}/lakegate_chaos${query}"
out="$(mktemp -d /tmp/lakegate-chaos.XXXXXX)"
cleanup() {
  psql "$admin" -qc "DROP DATABASE IF EXISTS lakegate_chaos WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$out"
}
trap cleanup EXIT

export PGOPTIONS="-c client_min_messages=warning"
cd "$root"
"$GO" build -o bin/lakegate ./cmd/lakegate
"$GO" build -o "$out/chaos" ./integration/chaos
psql "$admin" -qc "DROP DATABASE IF EXISTS lakegate_chaos WITH (FORCE)" >/dev/null
psql "$admin" -qc "CREATE DATABASE lakegate_chaos"
psql "$chaos_url" -q -v ON_ERROR_STOP=1 -v rows="$ROWS" -f "$here/testdata/iot.sql" >/dev/null
psql "$chaos_url" -q -v ON_ERROR_STOP=1 -f "$here/testdata/roles.sql" >/dev/null
"$out/chaos" all -bin bin/lakegate -db "$chaos_url" "$@"
