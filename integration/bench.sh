#!/usr/bin/env bash
# make bench: Go benchmarks of every package, plus the full path database →
# encoded bytes on the iot data set (1M readings), set beside psql's own
# \copy on the same data in the same run, the peak RSS of a process
# streaming every row, the server's peak RSS around result-heavy tool calls,
# and its CPU instructions per tool call under callgrind (when valgrind is
# installed; LAKEGATE_BENCH_BIN=PATH adds another build to compare), with
# OpenTelemetry tracing unset, sampled off and on (and unset in the
# LAKEGATE_BENCH_BIN build), and what an agent receives for a corpus of calls
# beside DBHub. Needs LAKEGATE_TEST_DATABASE_URL (an admin URL; make
# bench runs this under with-postgres.sh) and psql. The bench database
# (lakegate_bench) is loaded once and kept; BENCH_ROWS changes its size.
set -euo pipefail
GO="${1:-go}"
ROWS="${BENCH_ROWS:-1000000}"
admin="${LAKEGATE_TEST_DATABASE_URL:?set LAKEGATE_TEST_DATABASE_URL}"
# The servers started here take the test harness's variables for no
# setting of theirs.
export LAKEGATE_IGNORE_ENV='LAKEGATE_TEST_*'
here="$(cd "$(dirname "$0")" && pwd)"
base="${admin%%\?*}"; query=""; [[ "$admin" == *\?* ]] && query="?${admin#*\?}"
bench_url="${base%/*}/lakegate_bench${query}"
out="$(mktemp -d /tmp/lakegate-bench.XXXXXX)"
trap 'rm -rf "$out"' EXIT

if ! psql "$admin" -tAc "SELECT 1 FROM pg_database WHERE datname = 'lakegate_bench'" | grep -q 1; then
  psql "$admin" -qc "CREATE DATABASE lakegate_bench"
fi
n="$(psql "$bench_url" -tAc "SELECT count(*) FROM readings" 2>/dev/null || echo 0)"
if [[ "$n" != "$ROWS" ]]; then
  echo "loading $ROWS readings into lakegate_bench..."
  psql "$bench_url" -q -v ON_ERROR_STOP=1 -v rows="$ROWS" -f "$here/testdata/iot.sql" >/dev/null
fi
# Served through least-privileged roles: lakegate connects as lakegate and
# runs callers' SQL as lakegate_reader.
psql "$bench_url" -q -v ON_ERROR_STOP=1 -f "$here/testdata/roles.sql" >/dev/null
app_url="$(echo "$bench_url" | sed -E 's#://[^@/]*@#://lakegate@#')"

echo "== go benchmarks (all packages)"
"$GO" test -run '^$' -bench . -benchmem $("$GO" list ./... | grep -v /query$) | grep -E '^(Benchmark|ok|PASS)' || true
"$GO" test -run '^$' -bench 'BuildAndValidate|Validate|Encode' -benchmem ./query/ | grep -E '^Benchmark'
LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^$' -bench 'StreamReadings' -benchmem -benchtime 3x ./query/ | tee "$out/go.txt" | grep -E '^Benchmark'

echo "== page depth: a page of 100 readings by (ts, id), the first and the 1,000th (keyset; offset as paging was)"
psql "$bench_url" -qc "CREATE INDEX IF NOT EXISTS readings_ts_id ON readings (ts, id)" -c "ANALYZE readings"
LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^$' -bench 'PageDepth' -benchtime 200x ./query/ | tee "$out/page.txt" | grep -E '^Benchmark'
awk '/PageDepth\/page1-/ { p1 = $3 } /page1000-keyset/ { k = $3 } /page1000-offset/ { o = $3 }
  END { if (p1 > 0) printf "page 1,000 ÷ page 1: keyset %.2f, offset %.2f (target: keyset <= 1.5)\n", k / p1, o / p1 }' "$out/page.txt"

echo "== rollups: a year of one device at 1 Hz (31.5M rows), 500 points, from the rollups and from the rows; ingest with and without"
if [[ "$(psql "$bench_url" -tAc "SELECT count(*) FROM year_readings" 2>/dev/null || echo 0)" != 31536000 ]]; then
  echo "loading a year of readings (31.5M rows)..."
  psql "$bench_url" -q -v ON_ERROR_STOP=1 <<'SQL'
DROP TABLE IF EXISTS year_readings, lakegate_rollup_year_readings_1m, lakegate_rollup_year_readings_1h;
CREATE TABLE year_readings (ts timestamptz NOT NULL, device_id int NOT NULL, temperature float8 NOT NULL);
INSERT INTO year_readings SELECT t, 1, round((20 + 8 * sin(extract(epoch FROM t) / 86400 * 2 * pi()) + random())::numeric, 2)
FROM generate_series(timestamptz '2025-01-01 00:00:00+00', timestamptz '2025-12-31 23:59:59+00', interval '1 second') t;
ALTER TABLE year_readings ADD PRIMARY KEY (device_id, ts);
VACUUM ANALYZE year_readings;
SQL
fi
psql "$bench_url" -q -v ON_ERROR_STOP=1 -c "DROP TABLE IF EXISTS ingest_readings, lakegate_rollup_ingest_readings_1m, lakegate_rollup_ingest_readings_1h" \
  -c "CREATE TABLE ingest_readings (ts timestamptz NOT NULL, device_id int NOT NULL, temperature float8, humidity float8, PRIMARY KEY (device_id, ts))" \
  -c "DROP TABLE IF EXISTS ingest_w0, ingest_w1, ingest_w2, ingest_w3" \
  -c "CREATE TABLE ingest_w0 (LIKE ingest_readings INCLUDING ALL)" -c "CREATE TABLE ingest_w1 (LIKE ingest_readings INCLUDING ALL)" \
  -c "CREATE TABLE ingest_w2 (LIKE ingest_readings INCLUDING ALL)" -c "CREATE TABLE ingest_w3 (LIKE ingest_readings INCLUDING ALL)"
psql "$bench_url" -q -v ON_ERROR_STOP=1 -f "$here/testdata/roles.sql" >/dev/null
LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^$' -bench 'RollupYear' -benchtime 3x -timeout 30m ./query/ | tee "$out/rollup.txt" | grep -E '^Benchmark'
LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^$' -bench 'IngestRollups|IngestConcurrent' -benchtime 3s ./query/ | tee -a "$out/rollup.txt" | grep -E '^Benchmark'
awk '/^BenchmarkRollupYear\/rollup-/ { r = $3 } /^BenchmarkRollupYear\/rows-/ { w = $3 } /^BenchmarkIngestRollups\/plain-/ { p = $5 } /^BenchmarkIngestRollups\/rollups-/ { q = $5 }
  /^BenchmarkIngestConcurrent\/one-table-/ { o = $5 } /^BenchmarkIngestConcurrent\/four-tables-/ { f = $5 }
  END { if (w > 0 && p > 0) printf "a year from the rollups: %.1f ms, %.4fx the rows (%.0f ms); ingest with rollups %.2fx the rows/s without\n", r / 1e6, r / w, w / 1e6, q / p
        if (f > 0) printf "four writers into one table (one batch at a time) %.2fx four tables\n", o / f }' "$out/rollup.txt"

echo "== result cache: a time series over the 1M readings answered from the cache, and read again; then its third page"
LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^$' -bench 'ResultCache' -benchtime 20x ./query/ | tee "$out/cache.txt" | grep -E '^Benchmark'
awk '/^BenchmarkResultCache\/cached-/ { c = $3 } /^BenchmarkResultCache\/fresh-/ { f = $3 }
  /^BenchmarkResultCache\/page-cached-/ { pc = $3 } /^BenchmarkResultCache\/page-fresh-/ { pf = $3 }
  END { if (f > 0) printf "from the cache: %.2f ms, %.4fx reading it (%.1f ms)\n", c / 1e6, c / f, f / 1e6
        if (pf > 0) printf "its third page of 20, read ahead by the second: %.2f ms, %.4fx reading it (%.1f ms)\n", pc / 1e6, pc / pf, pf / 1e6 }' "$out/cache.txt"

echo "== psql \\copy (SELECT * FROM readings) to /dev/null csv, best of 3"
best=""
for _ in 1 2 3; do
  s=$(date +%s.%N)
  psql "$bench_url" -qc "\\copy (SELECT * FROM readings) to /dev/null csv"
  e=$(date +%s.%N)
  t=$(echo "$e - $s" | bc -l)
  if [[ -z "$best" ]] || (( $(echo "$t < $best" | bc -l) )); then best="$t"; fi
done
psql_rps=$(echo "$ROWS / $best" | bc -l)
printf 'psql: %.3f s, %.0f rows/s\n' "$best" "$psql_rps"

echo "== peak RSS of a process streaming every row (JSON)"
LAKEGATE_BENCH_RSS=1 LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^TestStreamRSS$' -count=1 -v ./query/ | grep -E 'peak RSS|FAIL|ok' || true

echo "== ratios (lakegate rows/s ÷ psql rows/s; targets: csv >= 0.7, json >= 0.5)"
for f in csv json ndjson; do
  rps=$(awk -v f="BenchmarkStreamReadings/$f-" 'index($1, f) == 1 { for (i = 1; i < NF; i++) if ($(i+1) == "rows/s") print $i }' "$out/go.txt" | tail -1)
  [[ -n "$rps" ]] && printf '%-6s %12.0f rows/s  ratio %.2f\n' "$f" "$rps" "$(echo "$rps / $psql_rps" | bc -l)"
done

# The block transport end to end: run_sql with export (query → blocks on
# disk) and a parallel fetch to a file (lakegate fetch), beside psql \copy
# of the same query to a file; the server's peak RSS.
echo "== block transport: export + parallel fetch vs psql \\copy to a file"
"$GO" build -o "$out/lakegate" ./cmd/lakegate
secret="bench-secret-0123456789abcdef0123456789"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
server="http://127.0.0.1:$port"
export LAKEGATE_JWT_SECRET="$secret"
tok="$("$out/lakegate" token --sub bench --role reader --ttl 1h)"
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l; }
# export_run SQL LABEL: starts a fresh server, exports SQL and fetches it,
# then prints wall time, the export call's time and the server's peak RSS.
# Default rate limits: block reads take no token, and fetch waits out a
# 429 should one come.
export_run() {
  local sql="$1" label="$2"
  LAKEGATE_LISTEN="127.0.0.1:$port" LAKEGATE_DATABASES="bench=$app_url" LAKEGATE_QUERY_ROLE=lakegate_reader LAKEGATE_MCP_ENABLED=true \
    LAKEGATE_DATA_DIR="$out/data" LAKEGATE_MCP_BLOCK_BUDGET=$((8 << 30)) LAKEGATE_MCP_BLOCK_BUDGET_PER_SUBJECT=$((4 << 30)) \
    LAKEGATE_LOG_LEVEL=warn "$out/lakegate" serve >"$out/serve.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -sf "$server/health" >/dev/null && break; sleep 0.1; done
  local s e wall call best_wall="" best_call="" rss bytes
  for _ in 1 2 3; do
    s=$(now)
    LAKEGATE_SERVER="$server" LAKEGATE_TOKEN="$tok" "$out/lakegate" fetch --database bench --sql "$sql" \
      -o "$out/export.ndjson" --parallel 4 2>"$out/fetch.log"
    e=$(now)
    wall=$(secs "$s" "$e")
    call=$(sed -n 's/.* in \([0-9.]*\)s$/\1/p' "$out/fetch.log")
    if [[ -z "$best_wall" ]] || (( $(echo "$wall < $best_wall" | bc -l) )); then best_wall="$wall"; fi
    if [[ -z "$best_call" ]] || (( $(echo "$call < $best_call" | bc -l) )); then best_call="$call"; fi
  done
  rss=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status")
  bytes=$(stat -c %s "$out/export.ndjson")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  printf '%-28s wall %.3f s (export call %.3f s), %d MB, server peak RSS %.1f MiB (best of 3)\n' \
    "$label" "$best_wall" "$best_call" $((bytes / 1000000)) "$(echo "$rss / 1024" | bc -l)"
  export_wall="$best_wall"; export_call="$best_call"
  rm -f "$out/export.ndjson"
}
psql_file=""
for _ in 1 2 3; do
  s=$(now); psql "$bench_url" -qc "\\copy (SELECT * FROM readings) to '$out/psql.csv' csv"; e=$(now)
  t=$(secs "$s" "$e"); rm -f "$out/psql.csv"
  if [[ -z "$psql_file" ]] || (( $(echo "$t < $psql_file" | bc -l) )); then psql_file="$t"; fi
done
printf '%-28s wall %.3f s (best of 3)\n' "psql \\copy to a file" "$psql_file"
one="SELECT * FROM readings"
four="SELECT r.* FROM readings r, generate_series(1, 4) g"
export_run "$one" "export $ROWS rows"
printf 'ratio export wall / psql: %.2f (target <= 1.5)\n' "$(echo "$export_wall / $psql_file" | bc -l)"
export_run "$four" "export $((ROWS * 4)) rows"

# The earlier build measured in the same run: LAKEGATE_BENCH_BIN, else the
# commit LAKEGATE_BENCH_BASE (default HEAD~10) built from a worktree.
earlier="${LAKEGATE_BENCH_BIN:-}"
base_rev="${LAKEGATE_BENCH_BASE:-HEAD~10}"
if [[ -z "$earlier" ]] && git -C "$here/.." rev-parse -q --verify "$base_rev^{commit}" >/dev/null 2>&1; then
  if git -C "$here/.." worktree add -q --detach "$out/base" "$base_rev" 2>/dev/null; then
    (cd "$out/base" && "$GO" build -o "$out/lakegate-base" ./cmd/lakegate) && earlier="$out/lakegate-base"
    git -C "$here/.." worktree remove --force "$out/base"
  fi
fi

# The seed's criterion: the export call with the fetch of every block
# (lakegate fetch, and one GET of /all following the transfer), beside the
# same rows streamed inline, with and without the profile, this build and
# the earlier one taking turns.
echo "== block transport: (export call + fetch of every block) / the same rows streamed inline"
LAKEGATE_BENCH_BIN="$earlier" LAKEGATE_BENCH_BLOCKS=1 LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^TestBlockTransportWall$' -count=1 -v -timeout 20m ./integration/ \
  | grep -E 'block transport|FAIL|^ok' || true

echo "== profile of a result in blocks: server CPU per export of every reading, with and without (mcp_result_profile)"
LAKEGATE_BENCH_PROFILE=1 LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^TestProfileCost$' -count=1 -v -timeout 20m ./integration/ \
  | grep -E 'profile:|FAIL|^ok' || true
LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^$' -bench 'ProfileReadings' -benchmem -benchtime 5x ./query/ | grep -E '^Benchmark'
"$GO" test -run '^$' -bench '^BenchmarkProfile$' -benchmem ./query/ | grep -E '^Benchmark'

echo "== an export of 40M generated rows as a job, fetched as it is written: wall, first bytes, server memory"
LAKEGATE_BENCH_JOBS=1 LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^TestBigExportJob$' -count=1 -v -timeout 30m ./integration/ \
  | grep -E 'export job|resident|FAIL|^ok' || true

echo "== 1,000 tails waiting on one server: memory, database load while nothing arrives, the wake-up"
LAKEGATE_BENCH_TAIL=1 LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^TestTailWaiters$' -count=1 -v -timeout 10m ./integration/ \
  | grep -E 'tail:|FAIL|^ok' || true

echo "== server peak RSS (VmHWM) around result-heavy calls, each on a fresh server; then calls without and with gc_headroom"
LAKEGATE_BENCH_MEMORY=1 LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^(TestResultMemory|TestGCHeadroomMemory)$' -count=1 -v -timeout 20m ./integration/ \
  | grep -E 'peak RSS|FAIL|^ok' || true

echo "== CPU instructions and bytes allocated per run_sql call over legacy SSE and Streamable HTTP, beside a bare go-sdk server (callgrind, GOMAXPROCS=1)"
if command -v valgrind >/dev/null 2>&1; then
  # and this tree against go-sdk decoding from the bytes it holds
  # (sdkpatched.sh): what is left of go-sdk's allocation once it does.
  patched=""
  bash "$here/sdkpatched.sh" "$GO" "$out/lakegate-sdkpatched" && patched="$out/lakegate-sdkpatched"
  for bin in $earlier "" $patched; do
    echo "binary: ${bin:-this tree}"
    LAKEGATE_BENCH_BIN="$bin" LAKEGATE_BENCH_CPU=1 LAKEGATE_BENCH_DATABASE_URL="$bench_url" \
      "$GO" test -run '^TestCallInstructions$' -count=1 -v -timeout 20m ./integration/ | grep -E 'instructions|FAIL|^ok' || true
  done
else
  echo "valgrind is not installed (apt-get install valgrind): skipped"
fi

echo "== tracing: instructions per run_sql point call, OpenTelemetry unset vs sampler always_off vs always_on (callgrind)"
if command -v valgrind >/dev/null 2>&1; then
  LAKEGATE_BENCH_BIN="${LAKEGATE_BENCH_BIN:-}" LAKEGATE_BENCH_TRACE=1 LAKEGATE_BENCH_DATABASE_URL="$bench_url" \
    "$GO" test -run '^TestTraceInstructions$' -count=1 -v -timeout 10m ./integration/ | grep -E 'tracing|FAIL|^ok' || true
else
  echo "valgrind is not installed (apt-get install valgrind): skipped"
fi

echo "== cluster: forwarding cost (callgrind), calls/s and CPU per call through haproxy with 1 and 3 replicas, MCP switch reach"
if command -v haproxy >/dev/null 2>&1 || [[ -x /usr/sbin/haproxy ]]; then
  LAKEGATE_BENCH_CLUSTER=1 LAKEGATE_BENCH_DATABASE_URL="$bench_url" \
    "$GO" test -run '^(TestForwardInstructions|TestClusterThroughput)$' -count=1 -v -timeout 20m ./integration/ | grep -E 'cluster:|FAIL|^ok' || true
else
  echo "haproxy is not installed (apt-get install haproxy): skipped"
fi

echo "== noisy neighbour: one subject's point query p50, idle vs while another runs its maximum of queries"
LAKEGATE_BENCH_FAIR=1 LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^TestNoisyNeighbour$' -count=1 -v ./integration/ \
  | grep -E 'noisy neighbour:|FAIL|ok' || true

echo "== memory per idle session, legacy SSE and Streamable HTTP with its GET stream (10,000 of each held by the binary; target <= 20 KiB)"
LAKEGATE_BENCH_SESSIONS=1 "$GO" test -run '^TestIdleSessionMemory$' -count=1 -v ./integration/ | grep -E 'per idle session|FAIL|ok' || true

# A fixed corpus of 30 agent calls (schema, lookups, aggregates, 5,000 rows,
# the whole table, pages, windows, time series, plans) on the integration
# seed: the characters each reply gives the model, for lakegate and for
# DBHub's default tools (integration/js's dev dependency) on the same data.
echo "== what an agent receives: 30 calls, lakegate beside DBHub's defaults (characters of text)"
if command -v npm >/dev/null 2>&1 && [[ ! -e "$here/js/node_modules/.bin/dbhub" ]]; then
  npm ci --prefix "$here/js" --include=dev --no-audit --no-fund --loglevel=error || true
fi
LAKEGATE_BENCH_CORPUS=1 "$GO" test -run '^TestAgentCorpus$' -count=1 -v ./integration/ | grep -E 'corpus:|FAIL|^ok' || true
