package query

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
)

// gaugeRollups are the rollups TestRollups declares on table gauge.
var gaugeRollups = []config.Rollup{{Table: "gauge", TimeColumn: "ts", Keys: []string{"site", "device"},
	Values: []string{"temp", "level"}, Resolutions: []string{"1m", "1h"}}}

// gaugeRows are n readings from start, one every step: sites a and b,
// devices 1 to 3 and a NULL one, temperatures in quarters (sums exact in
// binary, whatever their order) and some NULL, levels some NULL.
func gaugeRows(from, n int, start time.Time, step time.Duration) []map[string]any {
	rows := make([]map[string]any, 0, n)
	for i := from; i < from+n; i++ {
		var device, temp, level any = float64(1 + i%3), float64(i%40) * 0.25, float64(i % 17)
		if i%11 == 0 {
			device = nil
		}
		if i%7 == 0 {
			temp = nil
		}
		if i%13 == 0 {
			level = nil
		}
		rows = append(rows, map[string]any{"id": float64(i), "site": []string{"a", "b"}[i%2], "device": device,
			"ts": start.Add(time.Duration(i-from) * step).Format(time.RFC3339Nano), "temp": temp, "level": level})
	}
	return rows
}

// TestRollups keeps rollups through ingests, builds them for the rows
// already there, and checks that every time series they answer equals
// what the table's rows answer (an engine without rollups on the same
// database), on both dialects.
func TestRollups(t *testing.T) {
	ctx := t.Context()
	type pair struct {
		name      string
		with, raw *Engine
	}
	var pairs []pair
	// SQLite.
	path := filepath.Join(t.TempDir(), "gauge.db")
	execSQLite(t, path, `CREATE TABLE gauge (id INTEGER PRIMARY KEY, site TEXT NOT NULL, device INTEGER, ts TEXT NOT NULL, temp REAL, level INTEGER)`)
	lite := func(rollups []config.Rollup) *Engine {
		e, err := Open(ctx, []config.Database{{Name: "g", URL: "sqlite:" + path, Rollups: rollups}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close(context.Background()) })
		return e
	}
	pairs = append(pairs, pair{"sqlite", lite(gaugeRollups), lite(nil)})
	if url := os.Getenv(pgEnv); url != "" {
		admin, err := pgx.Connect(ctx, pgTestURL(url))
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(context.Background())
		if _, err := admin.Exec(ctx, `DROP TABLE IF EXISTS gauge, lakegate_rollup_gauge_1m, lakegate_rollup_gauge_1h;
CREATE TABLE gauge (id bigint PRIMARY KEY, site text NOT NULL, device int, ts timestamptz NOT NULL, temp float8, level int4)`); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = admin.Exec(context.Background(), "DROP TABLE IF EXISTS gauge, lakegate_rollup_gauge_1m, lakegate_rollup_gauge_1h")
		})
		pg := func(rollups []config.Rollup) *Engine {
			e, err := Open(ctx, []config.Database{{Name: "g", URL: pgAppURL, Rollups: rollups}}, &Options{QueryRole: pgtest.QueryRole})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close(context.Background()) })
			return e
		}
		pairs = append(pairs, pair{"postgres", pg(gaugeRollups), pg(nil)})
	}
	start := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			e := p.with
			// Rows before the rollups exist: the build takes them in.
			if _, err := e.Insert(ctx, lakegate.Caller{}, "g", "gauge", gaugeRows(0, 600, start, 17*time.Second)); err != nil {
				t.Fatal(err)
			}
			if info := e.Rollups(ctx); len(info) != 2 || info[0].Built || info[0].Error != "" {
				t.Fatalf("before the build: %+v", info)
			}
			if _, err := e.BuildRollups("g", ""); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 30*time.Second, "the build's end", func() bool {
				b := e.RollupBuilds()
				return len(b) == 1 && b[0].State != "building"
			})
			if b := e.RollupBuilds()[0]; b.State != "done" || b.Rows["1h"] == 0 || b.Rows["1m"] <= b.Rows["1h"] {
				t.Fatalf("build: %+v", b)
			}
			// Rows after: ingest keeps the rollups, in buckets already
			// there and new ones; a replayed batch adds nothing.
			later := gaugeRows(600, 400, start.Add(90*time.Minute+3*time.Second), 23*time.Second)
			if _, err := e.Insert(ctx, lakegate.Caller{}, "g", "gauge", later[:200]); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := e.InsertOnce(ctx, lakegate.Caller{}, "g", "gauge", later[200:], Idempotency{Key: "gauge-2", BodyHash: []byte{1}}); err != nil {
					t.Fatal(err)
				}
			}
			// A row that leaves out a kept column is refused.
			_, err := e.Insert(ctx, lakegate.Caller{}, "g", "gauge", []map[string]any{{"id": 5000.0, "site": "a", "ts": start.Format(time.RFC3339)}})
			if qe := wantKind(t, err, lakegate.KindValidation); qe != nil && !(strings.Contains(qe.Message, "device") && strings.Contains(qe.Message, "rollup")) {
				t.Errorf("refusal: %v", qe)
			}
			values := []string{"temp", "level"}
			all := []Select{{Agg: "count", As: "n"}, {Agg: "count", Column: "temp"}, {Agg: "sum", Column: "temp"}, {Agg: "sum", Column: "level"},
				{Agg: "avg", Column: "level"}, {Agg: "avg", Column: "temp"}, {Agg: "min", Column: "level"}, {Agg: "max", Column: "temp"}}
			cases := []struct {
				name    string
				r       TimeSeriesRequest
				rollup  string // the rollup that must answer; "": the rows
				buckets int
			}{
				{name: "hours, whole range", r: TimeSeriesRequest{Bucket: Bucket{Unit: "hour"}, Values: values,
					Start: "2025-03-01T00:00:00Z", End: "2025-03-01T05:00:00Z"}, rollup: "gauge 1 hour"},
				{name: "edges off the minute", r: TimeSeriesRequest{Bucket: Bucket{Unit: "minute", Count: 10}, Aggregates: all,
					GroupBy: []string{"site"}, Start: "2025-03-01T00:03:30Z", End: "2025-03-01T04:41:07.5Z"}, rollup: "gauge 1 minute"},
				{name: "groups and a key filter", r: TimeSeriesRequest{Bucket: Bucket{Unit: "hour", Count: 2}, Aggregates: all,
					GroupBy: []string{"site", "device"}, Filters: []Filter{{Or: []Filter{{Column: "device", Op: "=", Value: 1.0}, {Column: "device", Op: "is_null"}}}},
					Start: "2025-02-28T23:59:59Z", End: "2025-03-01T06:00:00Z"}, rollup: "gauge 1 hour"},
				{name: "a day, filled", r: TimeSeriesRequest{Bucket: Bucket{Unit: "day"}, Values: values, Fill: "previous", GroupBy: []string{"device"},
					Start: "2025-02-27T00:00:00Z", End: "2025-03-03T00:00:00Z"}, rollup: "gauge 1 hour"},
				{name: "a month", r: TimeSeriesRequest{Bucket: Bucket{Unit: "month"}, Values: values, Fill: "null",
					Start: "2025-01-01T00:00:00Z", End: "2025-05-01T00:00:00Z"}, rollup: "gauge 1 hour"},
				{name: "edges inside minutes", r: TimeSeriesRequest{Bucket: Bucket{Unit: "minute"}, Values: values,
					Start: "2025-03-01T00:01:05Z", End: "2025-03-01T00:03:55Z"}, rollup: "gauge 1 minute"},
				{name: "default range and bucket", r: TimeSeriesRequest{MaxPoints: 50, Values: values}, rollup: "gauge 1 minute"},
				// What rollups cannot answer goes to the rows.
				{name: "seconds", r: TimeSeriesRequest{Bucket: Bucket{Unit: "second", Count: 30}, Values: values,
					Start: "2025-03-01T00:00:00Z", End: "2025-03-01T01:00:00Z"}},
				{name: "a filter on a value", r: TimeSeriesRequest{Bucket: Bucket{Unit: "hour"}, Values: values,
					Filters: []Filter{{Column: "temp", Op: ">", Value: 3.0}}, Start: "2025-03-01T00:00:00Z", End: "2025-03-01T05:00:00Z"}},
				{name: "stddev", r: TimeSeriesRequest{Bucket: Bucket{Unit: "hour"}, Aggregates: []Select{{Agg: "stddev", Column: "temp"}},
					Start: "2025-03-01T00:00:00Z", End: "2025-03-01T05:00:00Z"}},
			}
			for _, c := range cases {
				r := c.r
				r.Database, r.Table, r.TimeColumn, r.Limit = "g", "gauge", "ts", 10000
				got, gotRows := collectTimeSeries(t, e, lakegate.Caller{}, r)
				want, wantRows := collectTimeSeries(t, p.raw, lakegate.Caller{}, r)
				if got.Series.Rollup != c.rollup || want.Series.Rollup != "" {
					t.Errorf("%s: answered from %q, want %q (sql %s)", c.name, got.Series.Rollup, c.rollup, got.SQL)
				}
				if len(wantRows) < 2 {
					t.Fatalf("%s: only %d rows: the case reads too little", c.name, len(wantRows))
				}
				if !reflect.DeepEqual(gotRows, wantRows) || !reflect.DeepEqual(got.Columns, want.Columns) {
					t.Errorf("%s: from the rollup\n%v\n%v\nfrom the rows\n%v\n%v\n(sql %s)", c.name, got.Columns, head(gotRows), want.Columns, head(wantRows), got.SQL)
				}
				if !reflect.DeepEqual(got.Series.Gaps, want.Series.Gaps) {
					t.Errorf("%s: gaps %v, want %v", c.name, got.Series.Gaps, want.Series.Gaps)
				}
			}
		})
	}
}
