#!/usr/bin/env bash
# Runs a command with LAKEGATE_TEST_DATABASE_URL pointing at a PostgreSQL.
# If the variable is already set, that database is used as it is. Otherwise a
# throwaway server is made from the PostgreSQL binaries on this machine
# (initdb + pg_ctl in a temporary directory, loopback only, trust auth) and
# removed when the command ends, with a second one of the same kind for the
# test that stops and starts its database: LAKEGATE_TEST_RESTART_DATABASE_URL
# and LAKEGATE_TEST_PG_CTL (`"$LAKEGATE_TEST_PG_CTL" stop|start`). An
# external database gets no second cluster, and that test skips.
set -euo pipefail

if [[ -n "${LAKEGATE_TEST_DATABASE_URL:-}" ]]; then
  exec "$@"
fi

bindir=""
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) /usr/local/pgsql/bin; do
  if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then bindir="$d"; break; fi
done
if [[ -z "$bindir" ]] && command -v initdb >/dev/null 2>&1; then
  bindir="$(dirname "$(command -v initdb)")"
fi
if [[ -z "$bindir" ]]; then
  echo "with-postgres: no PostgreSQL server binaries (initdb, pg_ctl) found." >&2
  echo "  Install them (Debian/Ubuntu: apt-get install postgresql) or set" >&2
  echo "  LAKEGATE_TEST_DATABASE_URL=postgres://user:pass@host:5432/db to use a running server." >&2
  exit 1
fi

as=()
owner=""
if [[ "$(id -u)" == 0 ]]; then
  # initdb refuses to run as root.
  owner="$(id -u postgres >/dev/null 2>&1 && echo postgres || echo nobody)"
  as=(runuser -u "$owner" --)
fi
dirs=()
cleanup() {
  for d in "${dirs[@]}"; do
    "${as[@]}" "$bindir/pg_ctl" -D "$d/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$d"
  done
}
trap cleanup EXIT

# cluster makes and starts one throwaway cluster and sets $url to it. Its
# directory holds pg-ctl, which stops (fast: sessions are ended) or starts
# it: tests that restart a database under load run it through
# LAKEGATE_TEST_PG_CTL ("$LAKEGATE_TEST_PG_CTL" stop|start).
cluster() {
  local dir port opts
  dir="$(mktemp -d /tmp/lakegate-pgtest.XXXXXX)"
  dirs+=("$dir")
  [[ -n "$owner" ]] && chown "$owner" "$dir"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 55432)"
  "${as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  opts="-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
  cat >"$dir/pg-ctl" <<EOF_CTL
#!/usr/bin/env bash
set -euo pipefail
case "\${1:-}" in
  stop)  exec ${as[*]} "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop ;;
  start) exec ${as[*]} "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$opts" start ;;
  *)     echo "usage: \$0 stop|start" >&2; exit 2 ;;
esac
EOF_CTL
  chmod 755 "$dir/pg-ctl"
  "$dir/pg-ctl" start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
  url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  ctl="$dir/pg-ctl"
}

# One cluster for the tests, and one of its own for the test that stops and
# starts its database (other packages' tests run at the same time).
cluster
export LAKEGATE_TEST_DATABASE_URL="$url"
cluster
export LAKEGATE_TEST_RESTART_DATABASE_URL="$url" LAKEGATE_TEST_PG_CTL="$ctl"
echo "with-postgres: throwaway PostgreSQL ($("$bindir/postgres" --version)) on ${LAKEGATE_TEST_DATABASE_URL#*@}" >&2
"$@"
