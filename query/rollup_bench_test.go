package query

import (
	"context"
	neturl "net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

// yearRollups are the rollups of make bench's year_readings: a year of
// one device at 1 Hz (31.5M rows).
var yearRollups = []config.Rollup{{Table: "year_readings", TimeColumn: "ts", Keys: []string{"device_id"},
	Values: []string{"temperature"}, Resolutions: []string{"1m", "1h"}}}

// benchEngineWith opens the bench database as benchEngine does, with
// rollups.
func benchEngineWith(tb testing.TB, rollups []config.Rollup) *Engine {
	tb.Helper()
	return benchEngineOpts(tb, rollups, Options{})
}

// benchEngineOpts is benchEngineWith with options o besides.
func benchEngineOpts(tb testing.TB, rollups []config.Rollup, o Options) *Engine {
	tb.Helper()
	raw := os.Getenv(benchEnv)
	if raw == "" {
		tb.Skipf("set %s to a database holding the iot data set (make bench does)", benchEnv)
	}
	u, err := neturl.Parse(raw)
	if err != nil {
		tb.Fatal(err)
	}
	u.User = neturl.User("lakegate")
	o.StatementTimeout, o.QueryRole = 5*time.Minute, "lakegate_reader"
	e, err := Open(tb.Context(), []config.Database{{Name: "iot", URL: u.String(), Rollups: rollups}}, &o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// buildRollups builds e's rollups of table unless they are built, and
// waits for the end.
func buildRollupsFor(tb testing.TB, e *Engine, table string) {
	tb.Helper()
	built := true
	for _, r := range e.Rollups(tb.Context()) {
		built = built && r.Built
	}
	if built {
		return
	}
	if _, err := e.BuildRollups("iot", table); err != nil {
		tb.Fatal(err)
	}
	for {
		bs := e.RollupBuilds()
		if len(bs) > 0 && bs[0].State != "building" {
			if bs[0].State != "done" {
				tb.Fatalf("build: %+v", bs[0])
			}
			tb.Logf("built the rollups of %s in %d ms: %v", table, bs[0].TookMS, bs[0].Rows)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkRollupYear is a year of one device at 1 Hz on a budget of 500
// points, answered from the rollups and from the rows.
func BenchmarkRollupYear(b *testing.B) {
	with, raw := benchEngineWith(b, yearRollups), benchEngineWith(b, nil)
	buildRollupsFor(b, with, "year_readings")
	r := TimeSeriesRequest{Database: "iot", Table: "year_readings", TimeColumn: "ts", MaxPoints: 500, Values: []string{"temperature"},
		Filters: []Filter{{Column: "device_id", Op: "=", Value: 1.0}}, Start: "2025-01-01T00:00:00Z", End: "2026-01-01T00:00:00Z", Limit: 1000}
	for _, tc := range []struct {
		name   string
		e      *Engine
		rollup bool
	}{{"rollup", with, true}, {"rows", raw, false}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				res, _ := collectTimeSeries(b, tc.e, lakegate.Caller{}, r)
				if res.RowCount < 300 || res.RowCount > 500 || (res.Series.Rollup != "") != tc.rollup {
					b.Fatalf("%d rows, rollup %q", res.RowCount, res.Series.Rollup)
				}
			}
		})
	}
}

// BenchmarkIngestRollups is the ingest of batches of 1,000 readings (100
// devices, 10 s each) into a table with and without rollups at 1 minute
// and 1 hour.
func BenchmarkIngestRollups(b *testing.B) {
	rollups := []config.Rollup{{Table: "ingest_readings", TimeColumn: "ts", Keys: []string{"device_id"},
		Values: []string{"temperature", "humidity"}, Resolutions: []string{"1m", "1h"}}}
	for i, tc := range []struct {
		name    string
		rollups []config.Rollup
	}{{"plain", nil}, {"rollups", rollups}} {
		b.Run(tc.name, func(b *testing.B) {
			e := benchEngineWith(b, tc.rollups)
			if tc.rollups != nil {
				buildRollupsFor(b, e, "ingest_readings")
			}
			start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 30 * 24 * time.Hour)
			batch := 0
			for b.Loop() {
				rows := make([]map[string]any, 0, 1000)
				for s := range 10 {
					ts := start.Add(time.Duration(batch*10+s) * time.Second).Format(time.RFC3339)
					for d := range 100 {
						rows = append(rows, map[string]any{"ts": ts, "device_id": float64(d), "temperature": 20 + float64(d%7)*0.5,
							"humidity": float64(40 + s)})
					}
				}
				batch++
				if n, err := e.Insert(b.Context(), lakegate.Caller{}, "iot", "ingest_readings", rows); err != nil || n != 1000 {
					b.Fatal(n, err)
				}
			}
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkIngestConcurrent is four writers ingesting batches of 1,000
// readings at once, into one table (their batches commit one at a time:
// the table's advisory lock) and into four tables (no lock shared).
func BenchmarkIngestConcurrent(b *testing.B) {
	e := benchEngineWith(b, nil)
	for i, tc := range []struct {
		name   string
		tables [4]string
	}{
		{"one-table", [4]string{"ingest_readings", "ingest_readings", "ingest_readings", "ingest_readings"}},
		{"four-tables", [4]string{"ingest_w0", "ingest_w1", "ingest_w2", "ingest_w3"}},
	} {
		// The function runs once per b.N tried: the batch count goes on
		// across runs, so that no key repeats.
		var batches atomic.Int64
		b.Run(tc.name, func(b *testing.B) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 30 * 24 * time.Hour)
			var writers atomic.Int64
			b.SetParallelism(2) // 4 writers on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				w := int(writers.Add(1)-1) % 4
				for pb.Next() {
					// Each batch its own second, so no key repeats.
					ts := start.Add(time.Duration(batches.Add(1)) * time.Second).Format(time.RFC3339)
					rows := make([]map[string]any, 0, 1000)
					for d := range 1000 {
						rows = append(rows, map[string]any{"ts": ts, "device_id": float64(d), "temperature": 20.5, "humidity": 40.0})
					}
					if _, err := e.Insert(context.Background(), lakegate.Caller{}, "iot", tc.tables[w], rows); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkResultCache is the same time series over the 1M readings (the
// whole range in 200 points of min, avg and max temperature) answered
// from the result cache and read again (fresh).
func BenchmarkResultCache(b *testing.B) {
	e := benchEngineOpts(b, nil, Options{ResultCacheTTL: time.Hour, ResultCacheBytes: 64 << 20})
	r := TimeSeriesRequest{Database: "iot", Table: "readings", TimeColumn: "ts", MaxPoints: 200,
		Values: []string{"temperature"}, Limit: 10000}
	for _, tc := range []struct {
		name  string
		fresh bool
	}{{"cached", false}, {"fresh", true}} {
		b.Run(tc.name, func(b *testing.B) {
			r := r
			r.Fresh = tc.fresh
			collectTimeSeries(b, e, lakegate.Caller{Subject: "bench"}, r) // kept
			for b.Loop() {
				res, _ := collectTimeSeries(b, e, lakegate.Caller{Subject: "bench"}, r)
				if res.Cache == nil || res.Cache.Hit == tc.fresh || res.RowCount == 0 {
					b.Fatalf("%+v", res.Cache)
				}
			}
		})
	}
	// The third page of 20 points, after the second read ahead (kept),
	// and read again.
	for _, tc := range []struct {
		name  string
		fresh bool
	}{{"page-cached", false}, {"page-fresh", true}} {
		b.Run(tc.name, func(b *testing.B) {
			r := r
			r.Limit = 20
			caller := lakegate.Caller{Subject: "bench-" + tc.name}
			first, _ := collectTimeSeries(b, e, caller, r)
			r.Cursor = first.NextCursor
			second, _ := collectTimeSeries(b, e, caller, r)
			r.Cursor, r.Fresh = second.NextCursor, tc.fresh
			for b.Loop() {
				res, _ := collectTimeSeries(b, e, caller, r)
				if res.Cache == nil || res.Cache.Hit == tc.fresh || res.RowCount != 20 {
					b.Fatalf("%+v", res)
				}
			}
		})
	}
}
