package sqlbuild

import (
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
			`SELECT date_bin($1, "ts", CAST($2 AS timestamptz)) AS "bucket", "device_id", avg("temp") AS "avg_temp", count(*) AS "n" FROM "public"."readings" WHERE "ts" >= $3 AND "ts" < $4 AND "status" = $5 GROUP BY 1, 2 ORDER BY "device_id", "bucket"`,
			[]any{pgInterval(15 * time.Minute), origin, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 1, 23, 0, 0, 0, time.UTC), "ok"}},
		{"pg month", Postgres, TimeSeriesRequest{TimeColumn: "ts", Bucket: Bucket{Unit: "month"}, Start: "2025-01-01T00:00:00Z", End: "2026-01-01T00:00:00Z"},
			`SELECT date_trunc('month', "ts", 'UTC') AS "bucket", count(*) AS "count" FROM "public"."readings" WHERE "ts" >= $1 AND "ts" < $2 GROUP BY 1 ORDER BY "bucket"`,
			[]any{time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"pg quarters on timestamp", Postgres, TimeSeriesRequest{TimeColumn: "tsn", Bucket: Bucket{Unit: "month", Count: 3}, Start: "2025-01-01", End: "2026-01-01"},
			`SELECT (make_timestamp((CAST(extract(year FROM "tsn") AS int) * 12 + CAST(extract(month FROM "tsn") AS int) - 1) / $1 * $2 / 12, (CAST(extract(year FROM "tsn") AS int) * 12 + CAST(extract(month FROM "tsn") AS int) - 1) / $3 * $4 % 12 + 1, 1, 0, 0, 0)) AT TIME ZONE 'UTC' AS "bucket", count(*) AS "count" FROM "public"."readings" WHERE "tsn" >= $5 AND "tsn" < $6 GROUP BY 1 ORDER BY "bucket"`,
			[]any{3, 3, 3, 3, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"sqlite hours", SQLite, TimeSeriesRequest{TimeColumn: "ts", Bucket: Bucket{Unit: "hour", Count: 2}, Aggregates: []Select{{Agg: "max", Column: "temp"}},
			Start: "2025-01-01T00:00:00Z", End: "2025-01-03T00:00:00Z"},
			`SELECT strftime('%Y-%m-%dT%H:%M:%SZ', CAST(strftime('%s', "ts") AS INTEGER) - ((CAST(strftime('%s', "ts") AS INTEGER) - ?) % ? + ?) % ?, 'unixepoch') AS "bucket", max("temp") AS "max_temp" FROM "readings" WHERE "ts" >= ? AND "ts" < ? GROUP BY 1 ORDER BY "bucket"`,
			[]any{origin.Unix(), int64(7200), int64(7200), int64(7200), "2025-01-01T00:00:00.000000Z", "2025-01-03T00:00:00.000000Z"}},
		{"sqlite months", SQLite, TimeSeriesRequest{TimeColumn: "ts", Bucket: Bucket{Unit: "month", Count: 2}, Start: "2025-01-01T00:00:00Z", End: "2025-03-01T00:00:00Z"},
			`SELECT printf('%04d-%02d-01T00:00:00Z', (CAST(strftime('%Y', "ts") AS INTEGER) * 12 + CAST(strftime('%m', "ts") AS INTEGER) - 1) / ? * ? / 12, (CAST(strftime('%Y', "ts") AS INTEGER) * 12 + CAST(strftime('%m', "ts") AS INTEGER) - 1) / ? * ? % 12 + 1) AS "bucket", count(*) AS "count" FROM "readings" WHERE "ts" >= ? AND "ts" < ? GROUP BY 1 ORDER BY "bucket"`,
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
