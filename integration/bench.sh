#!/usr/bin/env bash
# make bench: Go benchmarks of every package, plus the full path database →
# encoded bytes on the iot data set (1M readings), set beside psql's own
# \copy on the same data in the same run, and the peak RSS of a process
# streaming every row. Needs LAKEGATE_TEST_DATABASE_URL (an admin URL; make
# bench runs this under with-postgres.sh) and psql. The bench database
# (lakegate_bench) is loaded once and kept; BENCH_ROWS changes its size.
set -euo pipefail
GO="${1:-go}"
ROWS="${BENCH_ROWS:-1000000}"
admin="${LAKEGATE_TEST_DATABASE_URL:?set LAKEGATE_TEST_DATABASE_URL}"
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

echo "== go benchmarks (all packages)"
"$GO" test -run '^$' -bench . -benchmem $("$GO" list ./... | grep -v /query$) | grep -E '^(Benchmark|ok|PASS)' || true
"$GO" test -run '^$' -bench 'BuildAndValidate|Validate|Encode' -benchmem ./query/ | grep -E '^Benchmark'
LAKEGATE_BENCH_DATABASE_URL="$bench_url" "$GO" test -run '^$' -bench 'StreamReadings' -benchmem -benchtime 3x ./query/ | tee "$out/go.txt" | grep -E '^Benchmark'

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
