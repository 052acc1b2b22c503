package query

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
)

// minute from 2025-01-01T00:01Z) against counts computed in Go.
var bucketOrigin = time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC)

func TestTimeSeriesSQLite(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	tests := []struct {
		bucket     Bucket
		start, end string
		width      func(time.Time) time.Time
	}{
		{Bucket{Unit: "minute", Count: 7}, "2025-01-01T00:00:00Z", "2025-01-01T03:00:00Z", func(ts time.Time) time.Time {
			return bucketOrigin.Add(ts.Sub(bucketOrigin) / (7 * time.Minute) * (7 * time.Minute))
		}},
		{Bucket{Unit: "hour", Count: 1}, "2025-01-01T00:30:00Z", "2025-01-04T00:00:00Z", func(ts time.Time) time.Time { return ts.Truncate(time.Hour) }},
		{Bucket{Unit: "day", Count: 1}, "2025-01-01T00:00:00Z", "2025-01-05T00:00:00Z", func(ts time.Time) time.Time { return ts.Truncate(24 * time.Hour) }},
		{Bucket{Unit: "week", Count: 1}, "2024-12-20T00:00:00Z", "2025-02-01T00:00:00Z", func(ts time.Time) time.Time {
			return bucketOrigin.Add(ts.Sub(bucketOrigin) / (7 * 24 * time.Hour) * (7 * 24 * time.Hour))
		}},
		{Bucket{Unit: "month", Count: 1}, "2024-01-01T00:00:00Z", "2026-01-01T00:00:00Z", func(ts time.Time) time.Time {
			return time.Date(ts.Year(), ts.Month(), 1, 0, 0, 0, 0, time.UTC)
		}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.bucket), func(t *testing.T) {
			res, rows := collectTimeSeries(t, e, lakegate.Caller{}, TimeSeriesRequest{Database: "lite", Table: "readings", TimeColumn: "ts",
				Bucket: tt.bucket, Start: tt.start, End: tt.end, Aggregates: []Select{{Agg: "count", As: "n"}, {Agg: "min", Column: "id"}}, Limit: 10000})
			start, _ := time.Parse(time.RFC3339, tt.start)
			end, _ := time.Parse(time.RFC3339, tt.end)
			var want [][]any
			// demo readings: id g at 2025-01-01T00:00Z + g minutes.
			for g := 1; g <= demoReadings; g++ {
				ts := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(g) * time.Minute)
				if ts.Before(start) || !ts.Before(end) {
					continue
				}
				b := tt.width(ts).Format(time.RFC3339)
				if len(want) > 0 && want[len(want)-1][0] == b {
					want[len(want)-1][1] = want[len(want)-1][1].(int64) + 1
					continue
				}
				want = append(want, []any{b, int64(1), int64(g)})
			}
			if !reflect.DeepEqual(rows, want) {
				t.Errorf("got %d rows %v\nwant %d rows %v\n(sql %s)", len(rows), head(rows), len(want), head(want), res.SQL)
			}
			if res.Columns[0].Name != "bucket" || res.Columns[1].Name != "n" || res.Columns[2].Name != "min_id" {
				t.Errorf("got columns %+v", res.Columns)
			}
		})
	}
}

func head(rows [][]any) [][]any { return rows[:min(len(rows), 4)] }

// TestTimeSeriesPostgres compares buckets with hand-written SQL on the
// same fixture (readings every 3 s from 2025-01-01T00:00:03Z).
func TestTimeSeriesPostgres(t *testing.T) {
	e := pgEngine(t, nil)
	tests := []struct {
		name string
		r    TimeSeriesRequest
		want string
	}{
		{"7 s per device", TimeSeriesRequest{Bucket: Bucket{Unit: "second", Count: 7}, GroupBy: []string{"device_id"},
			Aggregates: []Select{{Agg: "count", As: "n"}, {Agg: "avg", Column: "temperature"}},
			Start:      "2025-01-01T00:00:00Z", End: "2025-01-01T00:10:00Z", Filters: []Filter{{Column: "device_id", Op: "<", Value: 4.0}}},
			`SELECT date_bin('7 seconds', ts, '2000-01-03T00:00:00Z') AS b, device_id, count(*), avg(temperature)
			 FROM readings WHERE ts >= '2025-01-01T00:00:00Z' AND ts < '2025-01-01T00:10:00Z' AND device_id < 4 GROUP BY 1, 2 ORDER BY 2, 1`},
		{"minutes", TimeSeriesRequest{Bucket: Bucket{Unit: "minute", Count: 1}, Aggregates: []Select{{Agg: "max", Column: "power_w"}, {Agg: "stddev", Column: "temperature"}},
			Start: "2025-01-01T00:00:30Z", End: "2025-01-01T01:00:00Z"},
			`SELECT date_trunc('minute', ts), max(power_w), stddev(temperature) FROM readings
			 WHERE ts >= '2025-01-01T00:00:30Z' AND ts < '2025-01-01T01:00:00Z' GROUP BY 1 ORDER BY 1`},
		{"week", TimeSeriesRequest{Bucket: Bucket{Unit: "week", Count: 1}, Start: "2024-12-01T00:00:00Z", End: "2025-02-01T00:00:00Z"},
			`SELECT date_trunc('week', ts AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', count(*) FROM readings
			 WHERE ts >= '2024-12-01T00:00:00Z' AND ts < '2025-02-01T00:00:00Z' GROUP BY 1 ORDER BY 1`},
		{"month", TimeSeriesRequest{Bucket: Bucket{Unit: "month", Count: 1}, Start: "2024-12-01T00:00:00Z", End: "2025-02-01T00:00:00Z"},
			`SELECT date_trunc('month', ts, 'UTC'), count(*) FROM readings
			 WHERE ts >= '2024-12-01T00:00:00Z' AND ts < '2025-02-01T00:00:00Z' GROUP BY 1 ORDER BY 1`},
		{"quarter", TimeSeriesRequest{Bucket: Bucket{Unit: "month", Count: 3}, Start: "2024-12-01T00:00:00Z", End: "2025-02-01T00:00:00Z"},
			`SELECT timestamptz '2025-01-01T00:00:00Z', count(*) FROM readings
			 WHERE ts >= '2024-12-01T00:00:00Z' AND ts < '2025-02-01T00:00:00Z'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.Database, tt.r.Table, tt.r.TimeColumn, tt.r.Limit = "pg", "readings", "ts", 10000
			res, got := collectTimeSeries(t, e, lakegate.Caller{}, tt.r)
			_, want := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: tt.want, Limit: 10000})
			if len(got) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("got %d rows %v\nwant %d rows %v\n(sql %s)", len(got), head(got), len(want), head(want), res.SQL)
			}
			if res.Columns[0].Name != "bucket" || res.Columns[0].Type != "timestamptz" {
				t.Errorf("got bucket column %+v, want bucket timestamptz", res.Columns[0])
			}
			for _, row := range got {
				wantRFC3339UTC(t, row[0])
			}
		})
	}
}

// wantRFC3339UTC fails t unless v is an RFC 3339 timestamp in UTC, as
// "2025-01-01T00:00:00Z".
func wantRFC3339UTC(t *testing.T, v any) {
	t.Helper()
	s, ok := v.(string)
	ts, err := time.Parse(time.RFC3339, s)
	if !ok || err != nil || !strings.HasSuffix(s, "Z") || ts.Format(time.RFC3339Nano) != s {
		t.Errorf("got bucket %#v, want an RFC 3339 UTC string like 2025-01-01T00:00:00Z", v)
	}
}

// TestTimeSeriesBucketText: the bucket is an RFC 3339 UTC string whatever
// the time column's type (timestamptz, timestamp, date) and dialect.
func TestTimeSeriesBucketText(t *testing.T) {
	engines := dialectEngines(t)
	tests := []struct {
		db, table, column string
		bucket            Bucket
		start, end        string
		want              []string
	}{
		{"lite", "readings", "ts", Bucket{Unit: "hour", Count: 1}, "2025-01-01T00:00:00Z", "2025-01-01T03:00:00Z",
			[]string{"2025-01-01T00:00:00Z", "2025-01-01T01:00:00Z", "2025-01-01T02:00:00Z"}},
		{"lite", "kinds", "ts", Bucket{Unit: "day", Count: 1}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-31T00:00:00Z", "2024-01-02T00:00:00Z"}},
		{"lite", "kinds", "d", Bucket{Unit: "month", Count: 1}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-01T00:00:00Z", "2024-02-01T00:00:00Z"}},
		{"pg", "readings", "ts", Bucket{Unit: "hour", Count: 1}, "2025-01-01T00:00:00Z", "2025-01-01T03:00:00Z",
			[]string{"2025-01-01T00:00:00Z"}},
		{"pg", "types", "ts", Bucket{Unit: "day", Count: 1}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-31T00:00:00Z", "2024-01-02T00:00:00Z"}},
		{"pg", "types", "tsn", Bucket{Unit: "hour", Count: 6}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-31T18:00:00Z", "2024-01-02T00:00:00Z"}},
		{"pg", "types", "tsn", Bucket{Unit: "month", Count: 1}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-01T00:00:00Z", "2024-01-01T00:00:00Z"}},
		{"pg", "types", "d", Bucket{Unit: "week", Count: 1}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-27T00:00:00Z", "2024-02-26T00:00:00Z"}},
		{"pg", "types", "d", Bucket{Unit: "month", Count: 12}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-01-01T00:00:00Z", "2024-01-01T00:00:00Z"}},
	}
	for _, en := range engines {
		for _, tt := range tests {
			if tt.db != en.db {
				continue
			}
			t.Run(fmt.Sprintf("%s %s.%s %v", tt.db, tt.table, tt.column, tt.bucket), func(t *testing.T) {
				res, rows := collectTimeSeries(t, en.e, lakegate.Caller{}, TimeSeriesRequest{Database: en.db, Table: tt.table, TimeColumn: tt.column,
					Bucket: tt.bucket, Start: tt.start, End: tt.end, Limit: 10000})
				var got []string
				for _, row := range rows {
					wantRFC3339UTC(t, row[0])
					s, _ := row[0].(string)
					got = append(got, s)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got buckets %v, want %v (sql %s)", got, tt.want, res.SQL)
				}
			})
		}
	}
}
