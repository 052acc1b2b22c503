#!/usr/bin/env bash
# Runs a command with LAKEGATE_TEST_DATABASE_URL pointing at a PostgreSQL.
# If the variable is already set, that database is used as it is. Otherwise a
# throwaway server is made from the PostgreSQL binaries on this machine
# (initdb + pg_ctl in a temporary directory, loopback only, trust auth) and
# removed when the command ends; LAKEGATE_TEST_PG_CTL then names a script
# that stops or starts it (`"$LAKEGATE_TEST_PG_CTL" stop|start`), for tests
# that restart the database. An external database gets no such script.
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

dir="$(mktemp -d /tmp/lakegate-pgtest.XXXXXX)"
as=()
if [[ "$(id -u)" == 0 ]]; then
  # initdb refuses to run as root.
  chown postgres "$dir" 2>/dev/null || chown nobody "$dir"
  owner="$(stat -c %U "$dir")"
  as=(runuser -u "$owner" --)
fi
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 55432)"

cleanup() {
  "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

"${as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
  { cat "$dir/initdb.log" >&2; exit 1; }

# pg-ctl stops (fast: sessions are ended) or starts this throwaway cluster;
# tests that restart the database under load run it through
# LAKEGATE_TEST_PG_CTL ("$LAKEGATE_TEST_PG_CTL" stop|start).
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

export LAKEGATE_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
export LAKEGATE_TEST_PG_CTL="$dir/pg-ctl"
echo "with-postgres: throwaway PostgreSQL ($("$bindir/postgres" --version)) on 127.0.0.1:$port" >&2
"$@"
