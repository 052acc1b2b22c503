#!/usr/bin/env bash
# make cluster: on loopback, under a temporary directory, a PostgreSQL
# primary and its streaming hot standby holding the iot data set in database
# iot (1,000,000 readings; CLUSTER_ROWS changes it), three lakegate replicas
# sharing state through the primary and reading from the standby, and
# haproxy in front on 127.0.0.1:32049 or the next free port. Prints the URL,
# tokens and the `claude mcp add` lines, then waits: Ctrl-C or SIGTERM stops
# it all and removes the directory. Needs haproxy, psql and the PostgreSQL
# server binaries.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rows="${CLUSTER_ROWS:-1000000}"
lakegate="$root/bin/lakegate"
say() { printf 'cluster: %s\n' "$*" >&2; }

haproxy="$(command -v haproxy || ls /usr/sbin/haproxy /usr/local/sbin/haproxy 2>/dev/null | head -1 || true)"
[[ -n "$haproxy" ]] || { say "haproxy is not installed: apt-get install haproxy"; exit 1; }
bindir=""
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) /usr/local/pgsql/bin; do
  [[ -x "$d/initdb" && -x "$d/pg_basebackup" ]] && { bindir="$d"; break; }
done
[[ -n "$bindir" ]] || { say "no PostgreSQL server binaries: apt-get install postgresql"; exit 1; }
command -v psql >/dev/null || { say "psql is not installed: apt-get install postgresql-client"; exit 1; }

# initdb refuses to run as root: PostgreSQL runs as postgres (or nobody).
as=()
if [[ "$(id -u)" == 0 ]]; then
  owner="$(id -u postgres >/dev/null 2>&1 && echo postgres || echo nobody)"
  as=(runuser -u "$owner" --)
fi
tmp="$(mktemp -d /tmp/lakegate-cluster.XXXXXX)"
[[ ${#as[@]} -gt 0 ]] && chown "$owner" "$tmp"

# On exit, stop in reverse order of start: haproxy and the replicas (each
# drains its requests), the build or load still running, both PostgreSQLs.
procs=() bgjobs=()
declare -A names
cleanup() {
  trap '' INT TERM
  for pid in "${procs[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${procs[@]}"; do wait "$pid" 2>/dev/null || true; done
  for pid in "${bgjobs[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  for pg in standby primary; do
    [[ -f "$tmp/$pg/postmaster.pid" ]] && "${as[@]}" "$bindir/pg_ctl" -D "$tmp/$pg" -m fast -w stop >/dev/null 2>&1 || true
  done
  rm -rf "$tmp"
  say "stopped; $tmp removed"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# freeport N prints N, or the first port after it nothing listens on.
freeport() {
  local p="$1"
  while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
  echo "$p"
}
lb_port="$(freeport 32049)"
ports=() p="$lb_port"
for _ in 1 2 3 4 5; do p="$(freeport $((p + 1)))"; ports+=("$p"); done
replica_ports=("${ports[@]:0:3}") primary_port="${ports[3]}" standby_port="${ports[4]}"
pgurl() { echo "postgres://${3:-postgres}@127.0.0.1:$1/$2?sslmode=disable"; }
pgstart() { # pgstart NAME PORT: starts the cluster in $tmp/NAME, logging to $tmp/NAME.log
  "${as[@]}" "$bindir/pg_ctl" -D "$tmp/$1" -l "$tmp/$1.log" -w -t 60 start -o "-p $2 -k $tmp \
    -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off -c synchronous_commit=off" >/dev/null ||
    { cat "$tmp/$1.log" >&2; exit 1; }
}

# Build bin/lakegate while PostgreSQL starts and loads.
make -C "$root" build >"$tmp/build.log" 2>&1 & build=$!; bgjobs+=("$build")

# 1. The primary (trust on loopback; initdb allows replication from 127.0.0.1)
# and its standby: a base backup with -R (standby.signal and primary_conninfo)
# over a replication slot, so the primary keeps the WAL it has not replayed.
say "PostgreSQL primary on 127.0.0.1:$primary_port, standby on 127.0.0.1:$standby_port ($tmp)"
"${as[@]}" "$bindir/initdb" -D "$tmp/primary" -U postgres -A trust --no-sync -E UTF8 >"$tmp/initdb.log" 2>&1 ||
  { cat "$tmp/initdb.log" >&2; exit 1; }
pgstart primary "$primary_port"
"${as[@]}" "$bindir/pg_basebackup" -D "$tmp/standby" -R -X stream -c fast -C -S standby \
  -h 127.0.0.1 -p "$primary_port" -U postgres
pgstart standby "$standby_port"
primary="$(pgurl "$primary_port" iot)" standby="$(pgurl "$standby_port" iot)"

# 2. The iot data set on the primary; progress from the readings table's
# size (84.5 bytes a row), then its index.
psql "$(pgurl "$primary_port" postgres)" -qc "CREATE DATABASE iot"
say "loading $rows readings into iot..."
start=$SECONDS
psql "$primary" -q -v ON_ERROR_STOP=1 -v rows="$rows" -f "$root/integration/testdata/iot.sql" >"$tmp/load.log" 2>&1 &
load=$!; bgjobs+=("$load")
progress="SELECT CASE WHEN EXISTS (SELECT FROM pg_stat_progress_create_index) THEN 'indexing'
  ELSE '~' || coalesce(pg_relation_size(to_regclass('readings')) * 10 / 845, 0) || ' of $rows readings written' END"
while sleep 1 && kill -0 "$load" 2>/dev/null; do
  say "  $((SECONDS - start)) s: $(psql "$primary" -tAc "$progress" 2>/dev/null || true)"
done
wait "$load" || { cat "$tmp/load.log" >&2; exit 1; }
say "loaded in $((SECONDS - start)) s"

# The roles lakegate serves it through: it connects as lakegate and runs
# callers' SQL as lakegate_reader (SELECT only). The replicas' shared state
# lives in a database of its own, which no served role reads.
psql "$primary" -q -v ON_ERROR_STOP=1 -f "$root/integration/testdata/roles.sql" >"$tmp/roles.log" 2>&1 ||
  { cat "$tmp/roles.log" >&2; exit 1; }
psql "$(pgurl "$primary_port" postgres)" -qc "CREATE DATABASE lakegate_cluster"
cluster_dsn="$(pgurl "$primary_port" lakegate_cluster)"

# 3. Wait until the standby has replayed all the primary has written.
lsn="$(psql "$primary" -tAc "SELECT pg_current_wal_lsn()")"
until [[ "$(psql "$standby" -tAc "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" == t ]]; do sleep 0.5; done
say "the standby has replayed it"

wait "$build" || { cat "$tmp/build.log" >&2; say "make build failed"; exit 1; }

# 4. Three replicas, one after another (each creates the shared tables if
# missing), sharing one JWT secret and one cluster secret (the key a
# replica signs the block reads it makes for a caller with), both made for
# the run and kept out of every database. Behind the balancer every client
# has its address, so no cap per address.
rand32() { openssl rand -hex 32 2>/dev/null || od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
secret="$(rand32)"
cluster_secret="$(rand32)"
(umask 077 && echo "$secret" >"$tmp/jwt-secret")
databases="[{\"name\":\"iot\",\"url\":\"$(pgurl "$primary_port" iot lakegate)\",\"read_urls\":[\"$(pgurl "$standby_port" iot lakegate)\"]}]"
# ready URL: waits up to 30 s for URL/ready to answer 200.
ready() {
  for _ in $(seq 150); do curl -sf -o /dev/null --max-time 2 "$1/ready" && return 0; sleep 0.2; done
  return 1
}
backends=""
for i in 1 2 3; do
  port="${replica_ports[$((i - 1))]}"
  mkdir -p "$tmp/replica-$i"
  # setsid: a Ctrl-C reaches this script only, which stops them in order.
  LAKEGATE_LISTEN="127.0.0.1:$port" LAKEGATE_DATA_DIR="$tmp/replica-$i" LAKEGATE_DATABASES="$databases" LAKEGATE_QUERY_ROLE=lakegate_reader \
    LAKEGATE_CLUSTER_DSN="$cluster_dsn" LAKEGATE_CLUSTER_SECRET="$cluster_secret" LAKEGATE_JWT_SECRET="$secret" LAKEGATE_MCP_ENABLED=true \
    LAKEGATE_MAX_CONNECTIONS_PER_ADDRESS=0 setsid "$lakegate" serve >"$tmp/replica-$i.log" 2>&1 &
  procs+=($!) names[$!]="replica-$i"
  ready "http://127.0.0.1:$port" || { tail -20 "$tmp/replica-$i.log" >&2; say "replica $i did not start"; exit 1; }
  say "replica $i on http://127.0.0.1:$port (log: $tmp/replica-$i.log)"
  backends+="  server r$i 127.0.0.1:$port check inter 1s fall 2 rise 1"$'\n'
done

# 5. haproxy: round robin, no stickiness, each replica checked on /ready;
# long timeouts for event streams.
cat >"$tmp/haproxy.cfg" <<EOF
defaults
  mode http
  timeout connect 2s
  timeout client 10m
  timeout server 10m
  timeout tunnel 10m
frontend lakegate
  bind 127.0.0.1:$lb_port
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /ready
  http-check expect status 200
$backends
EOF
setsid "$haproxy" -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 &
procs=($! "${procs[@]}") names[$!]=haproxy
url="http://127.0.0.1:$lb_port"
ready "$url" || { cat "$tmp/haproxy.log" >&2; say "haproxy did not start"; exit 1; }

# 6. Tokens, and the lines that connect Claude Code through the balancer.
token() { LAKEGATE_JWT_SECRET="$secret" "$lakegate" token --sub "$1" --role "$2" --ttl 24h; }
admin="$(token admin admin)" reader="$(token agent reader)"
cat <<EOF

lakegate cluster is running at $url (haproxy, round robin over 3 replicas), up in $SECONDS s
Database iot: $rows readings on the primary (127.0.0.1:$primary_port), reads on its standby (127.0.0.1:$standby_port).

  admin token:  $admin
  reader token: $reader

More tokens: LAKEGATE_JWT_SECRET=\$(cat $tmp/jwt-secret) $lakegate token --sub NAME --role reader

Connect Claude Code (Streamable HTTP, legacy SSE: add either or both):
  claude mcp add --transport http lakegate $url/mcp --header "Authorization: Bearer $reader"
  claude mcp add --transport sse lakegate-sse $url/mcp/sse --header "Authorization: Bearer $reader"

Try the REST API:
  curl -H "Authorization: Bearer $reader" $url/rest/sql -d '{"database":"iot","sql":"SELECT count(*) FROM readings"}'

Logs: $tmp/replica-{1,2,3}.log, haproxy.log. Ctrl-C stops it all.
EOF

# Wait for a signal; a replica or haproxy that exits on its own ends the run.
wait -n -p dead "${procs[@]}" || true
tail -20 "$tmp/${names[$dead]}.log" >&2
say "${names[$dead]} exited on its own: stopping the cluster"
exit 1
