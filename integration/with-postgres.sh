#!/usr/bin/env bash
# Runs a command with LAKEGATE_TEST_DATABASE_URL pointing at a PostgreSQL.
# If the variable is already set, that database is used as it is. Otherwise a
# throwaway server is made from the PostgreSQL binaries on this machine
# (initdb + pg_ctl in a temporary directory, loopback only, trust auth) and
# removed when the command ends, with a second one of the same kind for the
# test that stops and starts its database: LAKEGATE_TEST_RESTART_DATABASE_URL
# and LAKEGATE_TEST_PG_CTL (`"$LAKEGATE_TEST_PG_CTL" stop|start`), and a
# streaming hot standby of the first: LAKEGATE_TEST_STANDBY_URL (the same
# database path, the standby's port) and LAKEGATE_TEST_STANDBY_CTL
# (`"$LAKEGATE_TEST_STANDBY_CTL" stop|start`). An external database gets
# neither, and the tests that need them skip.
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

# freeport prints a free loopback port.
freeport() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo "$1"
}

# pgctl DIR PORT writes DIR/pg-ctl, which stops (fast: sessions are ended)
# or starts the cluster in DIR/data on PORT: tests that restart a database
# under load run it through LAKEGATE_TEST_PG_CTL or LAKEGATE_TEST_STANDBY_CTL
# ("$ctl" stop|start). The settings trade durability for speed; those of a
# standby must be at least its primary's (max_connections, max_wal_senders).
pgctl() {
  local dir="$1" port="$2" opts
  opts="-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
  opts+=" -c wal_level=replica -c max_wal_senders=10 -c hot_standby=on"
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
}

# newdir makes a directory the clusters' owner may write, removed on exit.
newdir() {
  dir="$(mktemp -d /tmp/lakegate-pgtest.XXXXXX)"
  dirs+=("$dir")
  [[ -n "$owner" ]] && chown "$owner" "$dir"
  return 0
}

# cluster makes and starts one throwaway cluster and sets $url, $port and
# $ctl to it. initdb -A trust also lets replication connections in from
# 127.0.0.1, and wal_level=replica is the default: a standby needs no more.
cluster() {
  local dir
  newdir
  port="$(freeport 55432)"
  "${as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  pgctl "$dir" "$port"
  url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  ctl="$dir/pg-ctl"
}

# standby PRIMARY_URL PRIMARY_PORT makes a streaming hot standby of the
# cluster on PRIMARY_PORT and sets $url (PRIMARY_URL on the standby's port)
# and $ctl to it. The base backup starts with an immediate checkpoint (-c
# fast) and keeps a replication slot (-C -S): the primary holds the WAL a
# stopped standby still needs. -R makes it a standby of the primary.
standby() {
  local dir primary="$1" pport="$2"
  newdir
  port="$(freeport 55433)"
  "${as[@]}" "$bindir/pg_basebackup" -D "$dir/data" -R -X stream -c fast -C -S lakegate_standby \
    -h 127.0.0.1 -p "$pport" -U postgres >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
  pgctl "$dir" "$port"
  url="${primary/:$pport\//:$port/}"
  ctl="$dir/pg-ctl"
}

# One cluster for the tests, its hot standby, and one cluster of its own for
# the test that stops and starts its database (other packages' tests run at
# the same time).
cluster
export LAKEGATE_TEST_DATABASE_URL="$url"
standby "$url" "$port"
export LAKEGATE_TEST_STANDBY_URL="$url" LAKEGATE_TEST_STANDBY_CTL="$ctl"
cluster
export LAKEGATE_TEST_RESTART_DATABASE_URL="$url" LAKEGATE_TEST_PG_CTL="$ctl"
echo "with-postgres: throwaway PostgreSQL ($("$bindir/postgres" --version)) on ${LAKEGATE_TEST_DATABASE_URL#*@}, hot standby on ${LAKEGATE_TEST_STANDBY_URL#*@}" >&2
"$@"
