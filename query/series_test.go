package query

import (
	"fmt"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// seriesCase is a data set's silent window: device 1 sends nothing in
// [silentFrom, silentTo), device 2 goes on, over [start, end) in buckets
// where each device otherwise sends in every one.
type seriesCase struct {
	db                   string
	e                    *Engine
	start, end           string
	bucket               Bucket
	silentFrom, silentTo string
	silent               int // buckets
}

func seriesCases(t *testing.T) []seriesCase {
	le, _ := sqliteEngine(t, nil)
	// The demo: a reading a minute, device g % 50: each every 50 minutes.
	cases := []seriesCase{{db: "lite", e: le, start: "2025-01-01T00:00:00Z", end: "2025-01-03T00:00:00Z", bucket: Bucket{Unit: "hour", Count: 1},
		silentFrom: "2025-01-01T10:00:00Z", silentTo: "2025-01-01T20:00:00Z", silent: 10}}
	if pe := maybePG(t); pe != nil {
		// The fixture: a reading every 3 s, device 1 + g % 20: each a
		// minute (device 1 from 00:01).
		cases = append(cases, seriesCase{db: "pg", e: pe, start: "2025-01-01T00:01:00Z", end: "2025-01-01T00:45:00Z", bucket: Bucket{Unit: "minute", Count: 1},
			silentFrom: "2025-01-01T00:10:00Z", silentTo: "2025-01-01T00:20:00Z", silent: 10})
	}
	return cases
}

// request is the two devices' series, device 1 silent in the window.
func (c seriesCase) request() TimeSeriesRequest {
	return TimeSeriesRequest{Database: c.db, Table: "readings", TimeColumn: "ts", Bucket: c.bucket, Start: c.start, End: c.end,
		GroupBy: []string{"device_id"}, Values: []string{"temperature"}, Limit: 10000,
		Filters: []Filter{{Column: "device_id", Op: "in", Value: []any{1.0, 2.0}}, {Or: []Filter{
			{Column: "device_id", Op: "=", Value: 2.0}, {Column: "ts", Op: "<", Value: c.silentFrom}, {Column: "ts", Op: ">=", Value: c.silentTo}}}}}
}

// Gaps, on both dialects: a device that goes silent shows as a run of
// empty buckets where it went silent, every bucket of a series is a row
// or a gap, and with a fill every bucket is a row (count 0 in a gap,
// NULL or the last values with rows).
func TestSeriesGaps(t *testing.T) {
	for _, c := range seriesCases(t) {
		t.Run(c.db, func(t *testing.T) {
			res, rows := collectTimeSeries(t, c.e, lakegate.Caller{}, c.request())
			info := res.Series
			if info == nil || info.Buckets < 20 {
				t.Fatalf("series info %+v, want the range's buckets", info)
			}
			if got := colNames(res); fmt.Sprint(got) != "[bucket device_id count min_temperature avg_temperature max_temperature]" {
				t.Errorf("columns %v, want count, min, avg and max of the value", got)
			}
			perDevice := map[any]int{}
			for _, r := range rows {
				perDevice[r[1]]++
			}
			gapsOf := map[any]int{}
			found := false
			silentFrom, _ := sqlbuild.ParseTime(c.silentFrom)
			for _, g := range info.Gaps {
				gapsOf[g.Group[0]] += g.Buckets
				found = found || g.Group[0] == int64(1) && g.From.Equal(silentFrom) && g.Buckets == c.silent
			}
			if !found || info.GapRuns != len(info.Gaps) || info.GapBuckets != c.silent {
				t.Errorf("gaps %+v (%d runs, %d buckets), want device 1's %d buckets from %s", info.Gaps, info.GapRuns, info.GapBuckets, c.silent, c.silentFrom)
			}
			for _, dev := range []any{int64(1), int64(2)} {
				if perDevice[dev]+gapsOf[dev] != info.Buckets {
					t.Errorf("device %v: %d rows and %d empty buckets, want the %d buckets", dev, perDevice[dev], gapsOf[dev], info.Buckets)
				}
			}

			for _, fill := range []string{"null", "previous"} {
				r := c.request()
				r.Fill = fill
				fres, frows := collectTimeSeries(t, c.e, lakegate.Caller{}, r)
				if len(frows) != 2*info.Buckets || len(fres.Columns) != 6 || fres.Series.GapBuckets != c.silent {
					t.Fatalf("fill %s: %d rows, %d columns, %d empty buckets; want %d rows, 6 columns, %d", fill, len(frows), len(fres.Columns),
						fres.Series.GapBuckets, 2*info.Buckets, c.silent)
				}
				empty := 0
				for i, row := range frows {
					if row[2] != int64(0) {
						continue
					}
					empty++
					want := any(nil)
					if fill == "previous" {
						want = frows[i-1][4] // the window is mid-series
					}
					if fmt.Sprint(row[4]) != fmt.Sprint(want) {
						t.Errorf("fill %s: an empty bucket's avg %v, want %v", fill, row[4], want)
					}
				}
				if empty != c.silent {
					t.Errorf("fill %s: %d rows of count 0, want %d", fill, empty, c.silent)
				}
			}
		})
	}
}

// A page of a series ends where its row cap cuts it, and the next
// continues after it: the pages are the whole result, and their gaps add
// up to the whole's, with or without a fill.
func TestSeriesPages(t *testing.T) {
	for _, c := range seriesCases(t) {
		for _, fill := range []string{"", "previous"} {
			t.Run(c.db+"/"+fill, func(t *testing.T) {
				r := c.request()
				r.Fill = fill
				whole, want := collectTimeSeries(t, c.e, lakegate.Caller{}, r)
				r.Limit = 7
				var got [][]any
				gaps := 0
				for n := 0; n < 1000; n++ {
					res, rows := collectTimeSeries(t, c.e, lakegate.Caller{}, r)
					got = append(got, rows...)
					gaps += res.Series.GapBuckets
					if res.NextCursor == "" {
						break
					}
					r.Cursor = res.NextCursor
				}
				if fmt.Sprint(got) != fmt.Sprint(want) || gaps != whole.Series.GapBuckets {
					t.Errorf("pages: %d rows, %d empty buckets; want %d rows, %d", len(got), gaps, len(want), whole.Series.GapBuckets)
				}
			})
		}
	}
}

// Without a range or a bucket, the range is the data's own and the
// bucket the narrowest round width within max_points; a series with no
// row in its range is one gap.
func TestSeriesBudget(t *testing.T) {
	for _, c := range seriesCases(t) {
		t.Run(c.db, func(t *testing.T) {
			r := TimeSeriesRequest{Database: c.db, Table: "readings", TimeColumn: "ts", MaxPoints: 40, Values: []string{"temperature"}}
			res, rows := collectTimeSeries(t, c.e, lakegate.Caller{}, r)
			_, span := collectSQL(t, c.e, lakegate.Caller{}, SQLRequest{Database: c.db, SQL: "SELECT min(ts), max(ts), count(*) FROM readings"})
			first, _ := sqlbuild.ParseTime(fmt.Sprint(span[0][0]))
			last, _ := sqlbuild.ParseTime(fmt.Sprint(span[0][1]))
			info := res.Series
			if !info.Start.Equal(first) || !info.End.After(last) || info.End.Sub(last) > time.Millisecond {
				t.Errorf("range %v to %v, want the data's, %v to just past %v", info.Start, info.End, first, last)
			}
			if info.Buckets > 40 || len(rows) > 40 {
				t.Errorf("%d buckets, %d rows; want at most max_points (40)", info.Buckets, len(rows))
			}
			i := 0
			for sqlbuild.BucketLadder[i] != info.Bucket {
				i++
			}
			if i > 0 && sqlbuild.BucketsIn(sqlbuild.BucketLadder[i-1], info.Start, info.End) <= 40 {
				t.Errorf("bucket %+v, but the narrower %+v fits", info.Bucket, sqlbuild.BucketLadder[i-1])
			}
			total := int64(0)
			for _, row := range rows {
				total += row[1].(int64)
			}
			if total != span[0][2].(int64) {
				t.Errorf("the buckets count %d rows, want %d", total, span[0][2])
			}

			silent := c.request()
			silent.Filters = []Filter{{Column: "device_id", Op: "=", Value: 1.0}, {Column: "status", Op: "=", Value: "unheard of"}}
			silent.Start, silent.End, silent.GroupBy = c.silentFrom, c.silentTo, nil
			res, rows = collectTimeSeries(t, c.e, lakegate.Caller{}, silent)
			if len(rows) != 0 || res.Series.GapRuns != 1 || res.Series.GapBuckets != c.silent {
				t.Errorf("a silent device: %d rows, gaps %+v; want one gap of %d buckets", len(rows), res.Series.Gaps, c.silent)
			}
		})
	}
}

func colNames(res *Result) []string {
	out := make([]string, len(res.Columns))
	for i, c := range res.Columns {
		out[i] = c.Name
	}
	return out
}
