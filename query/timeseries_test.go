package query

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
)

func TestBuildTimeSeries(t *testing.T) {
	tbl := fakeTable("public", "readings", "id:int8", "device_id:int4", "ts:timestamptz", "tsn:timestamp", "d:date", "temp:float8", "status:text")
	origin := bucketOrigin
	tests := []struct {
		name     string
		d        Dialect
		r        TimeSeriesRequest
		wantSQL  string
		wantArgs []any
	}{
		{"pg minutes with group and filter", Postgres, TimeSeriesRequest{TimeColumn: "ts", Bucket: Bucket{Unit: "minute", Count: 15},
			Aggregates: []Select{{Agg: "avg", Column: "temp"}, {Agg: "count", As: "n"}}, GroupBy: []string{"device_id"},
			Start: "2025-01-01T00:00:00Z", End: "2025-01-02T00:00:00+01:00", Filters: []Filter{{Column: "status", Op: "=", Value: "ok"}}},
			`SELECT date_bin($1, "ts", CAST($2 AS timestamptz)) AS "bucket", "device_id", avg("temp") AS "avg_temp", count(*) AS "n" FROM "public"."readings" WHERE "ts" >= $3 AND "ts" < $4 AND "status" = $5 GROUP BY 1, 2 ORDER BY 1, 2`,
			[]any{pgInterval(15 * time.Minute), origin, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 1, 23, 0, 0, 0, time.UTC), "ok"}},
		{"pg month", Postgres, TimeSeriesRequest{TimeColumn: "ts", Bucket: Bucket{Unit: "month"}, Start: "2025-01-01T00:00:00Z", End: "2026-01-01T00:00:00Z"},
			`SELECT date_trunc('month', "ts", 'UTC') AS "bucket", count(*) AS "count" FROM "public"."readings" WHERE "ts" >= $1 AND "ts" < $2 GROUP BY 1 ORDER BY 1`,
			[]any{time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"pg quarters on timestamp", Postgres, TimeSeriesRequest{TimeColumn: "tsn", Bucket: Bucket{Unit: "month", Count: 3}, Start: "2025-01-01", End: "2026-01-01"},
			`SELECT (make_timestamp((CAST(extract(year FROM "tsn") AS int) * 12 + CAST(extract(month FROM "tsn") AS int) - 1) / $1 * $2 / 12, (CAST(extract(year FROM "tsn") AS int) * 12 + CAST(extract(month FROM "tsn") AS int) - 1) / $3 * $4 % 12 + 1, 1, 0, 0, 0)) AT TIME ZONE 'UTC' AS "bucket", count(*) AS "count" FROM "public"."readings" WHERE "tsn" >= $5 AND "tsn" < $6 GROUP BY 1 ORDER BY 1`,
			[]any{3, 3, 3, 3, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"sqlite hours", SQLite, TimeSeriesRequest{TimeColumn: "ts", Bucket: Bucket{Unit: "hour", Count: 2}, Aggregates: []Select{{Agg: "max", Column: "temp"}},
			Start: "2025-01-01T00:00:00Z", End: "2025-01-03T00:00:00Z"},
			`SELECT strftime('%Y-%m-%dT%H:%M:%SZ', CAST(strftime('%s', "ts") AS INTEGER) - ((CAST(strftime('%s', "ts") AS INTEGER) - ?) % ? + ?) % ?, 'unixepoch') AS "bucket", max("temp") AS "max_temp" FROM "readings" WHERE "ts" >= ? AND "ts" < ? GROUP BY 1 ORDER BY 1`,
			[]any{origin.Unix(), int64(7200), int64(7200), int64(7200), "2025-01-01T00:00:00.000000Z", "2025-01-03T00:00:00.000000Z"}},
		{"sqlite months", SQLite, TimeSeriesRequest{TimeColumn: "ts", Bucket: Bucket{Unit: "month", Count: 2}, Start: "2025-01-01T00:00:00Z", End: "2025-03-01T00:00:00Z"},
			`SELECT printf('%04d-%02d-01T00:00:00Z', (CAST(strftime('%Y', "ts") AS INTEGER) * 12 + CAST(strftime('%m', "ts") AS INTEGER) - 1) / ? * ? / 12, (CAST(strftime('%Y', "ts") AS INTEGER) * 12 + CAST(strftime('%m', "ts") AS INTEGER) - 1) / ? * ? % 12 + 1) AS "bucket", count(*) AS "count" FROM "readings" WHERE "ts" >= ? AND "ts" < ? GROUP BY 1 ORDER BY 1`,
			[]any{2, 2, 2, 2, "2025-01-01T00:00:00.000000Z", "2025-03-01T00:00:00.000000Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, args, err := buildTimeSeries(tt.d, tbl, tt.r)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.wantSQL {
				t.Errorf("got  %s\nwant %s", got, tt.wantSQL)
			}
			if !reflect.DeepEqual(args, tt.wantArgs) {
				t.Errorf("got args %#v, want %#v", args, tt.wantArgs)
			}
			if again, _, _ := buildTimeSeries(tt.d, tbl, tt.r); again != got {
				t.Errorf("not deterministic")
			}
		})
	}
}

func TestBuildTimeSeriesErrors(t *testing.T) {
	tbl := fakeTable("public", "readings", "id:int8", "ts:timestamptz", "temp:float8", "status:text")
	ok := TimeSeriesRequest{TimeColumn: "ts", Bucket: Bucket{Unit: "hour"}, Start: "2025-01-01T00:00:00Z", End: "2025-01-02T00:00:00Z"}
	with := func(f func(*TimeSeriesRequest)) TimeSeriesRequest { r := ok; f(&r); return r }
	tests := []struct {
		name string
		r    TimeSeriesRequest
		want string
	}{
		{"no time column", with(func(r *TimeSeriesRequest) { r.TimeColumn = "" }), "time_column is required"},
		{"unknown time column", with(func(r *TimeSeriesRequest) { r.TimeColumn = "tss" }), `did you mean "ts"?`},
		{"text time column", with(func(r *TimeSeriesRequest) { r.TimeColumn = "status" }), "not a timestamp"},
		{"bad start", with(func(r *TimeSeriesRequest) { r.Start = "yesterday" }), `start "yesterday" is not a timestamp`},
		{"missing end", with(func(r *TimeSeriesRequest) { r.End = "" }), "end"},
		{"end before start", with(func(r *TimeSeriesRequest) { r.End = "2024-12-31T00:00:00Z" }), "end must be after start"},
		{"unknown unit", with(func(r *TimeSeriesRequest) { r.Bucket.Unit = "fortnight" }), `unknown bucket unit "fortnight"`},
		{"negative count", with(func(r *TimeSeriesRequest) { r.Bucket.Count = -1 }), "bucket count"},
		{"too many buckets", with(func(r *TimeSeriesRequest) { r.Bucket.Unit = "second"; r.End = "2025-01-03T00:00:00Z" }), "the limit is 100000"},
		{"too many months", with(func(r *TimeSeriesRequest) {
			r.Bucket.Unit = "month"
			r.End = "9999-01-01T00:00:00Z"
			r.Start = "0001-01-01T00:00:00Z"
		}), "the limit is 100000"},
		{"plain column as aggregate", with(func(r *TimeSeriesRequest) { r.Aggregates = cols("temp") }), "has no agg"},
		{"duplicate alias", with(func(r *TimeSeriesRequest) { r.Aggregates = []Select{{Agg: "count", As: "bucket"}} }), `"bucket" is used twice`},
		{"bad filter", with(func(r *TimeSeriesRequest) { r.Filters = []Filter{{Column: "temp", Op: "=", Value: "hot"}} }), "expected a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := buildTimeSeries(Postgres, tbl, tt.r)
			qe := wantKind(t, err, lakegate.KindValidation)
			if !strings.Contains(qe.Message+" "+qe.Hint, tt.want) {
				t.Errorf("got %q / %q, want %q", qe.Message, qe.Hint, tt.want)
			}
		})
	}
}

// TestTimeSeriesSQLite checks buckets on the demo data (one reading a
// minute from 2025-01-01T00:01Z) against counts computed in Go.
func TestTimeSeriesSQLite(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	tests := []struct {
		bucket     Bucket
		start, end string
		width      func(time.Time) time.Time
	}{
		{Bucket{"minute", 7}, "2025-01-01T00:00:00Z", "2025-01-01T03:00:00Z", func(ts time.Time) time.Time {
			return bucketOrigin.Add(ts.Sub(bucketOrigin) / (7 * time.Minute) * (7 * time.Minute))
		}},
		{Bucket{"hour", 1}, "2025-01-01T00:30:00Z", "2025-01-04T00:00:00Z", func(ts time.Time) time.Time { return ts.Truncate(time.Hour) }},
		{Bucket{"day", 1}, "2025-01-01T00:00:00Z", "2025-01-05T00:00:00Z", func(ts time.Time) time.Time { return ts.Truncate(24 * time.Hour) }},
		{Bucket{"week", 1}, "2024-12-20T00:00:00Z", "2025-02-01T00:00:00Z", func(ts time.Time) time.Time {
			return bucketOrigin.Add(ts.Sub(bucketOrigin) / (7 * 24 * time.Hour) * (7 * 24 * time.Hour))
		}},
		{Bucket{"month", 1}, "2024-01-01T00:00:00Z", "2026-01-01T00:00:00Z", func(ts time.Time) time.Time {
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
		{"7 s per device", TimeSeriesRequest{Bucket: Bucket{"second", 7}, GroupBy: []string{"device_id"},
			Aggregates: []Select{{Agg: "count", As: "n"}, {Agg: "avg", Column: "temperature"}},
			Start:      "2025-01-01T00:00:00Z", End: "2025-01-01T00:10:00Z", Filters: []Filter{{Column: "device_id", Op: "<", Value: 4.0}}},
			`SELECT date_bin('7 seconds', ts, '2000-01-03T00:00:00Z') AS b, device_id, count(*), avg(temperature)
			 FROM readings WHERE ts >= '2025-01-01T00:00:00Z' AND ts < '2025-01-01T00:10:00Z' AND device_id < 4 GROUP BY 1, 2 ORDER BY 1, 2`},
		{"minutes", TimeSeriesRequest{Bucket: Bucket{"minute", 1}, Aggregates: []Select{{Agg: "max", Column: "power_w"}, {Agg: "stddev", Column: "temperature"}},
			Start: "2025-01-01T00:00:30Z", End: "2025-01-01T01:00:00Z"},
			`SELECT date_trunc('minute', ts), max(power_w), stddev(temperature) FROM readings
			 WHERE ts >= '2025-01-01T00:00:30Z' AND ts < '2025-01-01T01:00:00Z' GROUP BY 1 ORDER BY 1`},
		{"week", TimeSeriesRequest{Bucket: Bucket{"week", 1}, Start: "2024-12-01T00:00:00Z", End: "2025-02-01T00:00:00Z"},
			`SELECT date_trunc('week', ts AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', count(*) FROM readings
			 WHERE ts >= '2024-12-01T00:00:00Z' AND ts < '2025-02-01T00:00:00Z' GROUP BY 1 ORDER BY 1`},
		{"month", TimeSeriesRequest{Bucket: Bucket{"month", 1}, Start: "2024-12-01T00:00:00Z", End: "2025-02-01T00:00:00Z"},
			`SELECT date_trunc('month', ts, 'UTC'), count(*) FROM readings
			 WHERE ts >= '2024-12-01T00:00:00Z' AND ts < '2025-02-01T00:00:00Z' GROUP BY 1 ORDER BY 1`},
		{"quarter", TimeSeriesRequest{Bucket: Bucket{"month", 3}, Start: "2024-12-01T00:00:00Z", End: "2025-02-01T00:00:00Z"},
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
	type engine struct {
		db string
		e  *Engine
	}
	le, _ := sqliteEngine(t, nil)
	engines := []engine{{"lite", le}}
	if pe := maybePG(t); pe != nil {
		engines = append(engines, engine{"pg", pe})
	}
	tests := []struct {
		db, table, column string
		bucket            Bucket
		start, end        string
		want              []string
	}{
		{"lite", "readings", "ts", Bucket{"hour", 1}, "2025-01-01T00:00:00Z", "2025-01-01T03:00:00Z",
			[]string{"2025-01-01T00:00:00Z", "2025-01-01T01:00:00Z", "2025-01-01T02:00:00Z"}},
		{"lite", "kinds", "ts", Bucket{"day", 1}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-31T00:00:00Z", "2024-01-02T00:00:00Z"}},
		{"lite", "kinds", "d", Bucket{"month", 1}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-01T00:00:00Z", "2024-02-01T00:00:00Z"}},
		{"pg", "readings", "ts", Bucket{"hour", 1}, "2025-01-01T00:00:00Z", "2025-01-01T03:00:00Z",
			[]string{"2025-01-01T00:00:00Z"}},
		{"pg", "types", "ts", Bucket{"day", 1}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-31T00:00:00Z", "2024-01-02T00:00:00Z"}},
		{"pg", "types", "tsn", Bucket{"hour", 6}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-31T18:00:00Z", "2024-01-02T00:00:00Z"}},
		{"pg", "types", "tsn", Bucket{"month", 1}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-01T00:00:00Z", "2024-01-01T00:00:00Z"}},
		{"pg", "types", "d", Bucket{"week", 1}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"1999-12-27T00:00:00Z", "2024-02-26T00:00:00Z"}},
		{"pg", "types", "d", Bucket{"month", 12}, "1999-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
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
