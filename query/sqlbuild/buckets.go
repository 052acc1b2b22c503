package sqlbuild

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lakegate/lakegate"
)

// Time buckets: their widths, the range they span, the round width a
// series on a budget takes, and how each dialect computes a row's bucket
// (the same starts in both, from one origin).

// maxBuckets bounds the buckets a time series range may span.
const maxBuckets = 100_000

// bucketOrigin aligns buckets of both dialects: a Monday, so weeks start
// on Mondays (UTC).
var bucketOrigin = time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC)

// bucketUnits are the widths of the fixed-size bucket units.
var bucketUnits = map[string]time.Duration{
	"second": time.Second, "minute": time.Minute, "hour": time.Hour,
	"day": 24 * time.Hour, "week": 7 * 24 * time.Hour,
}

// tsRange checks a time series range and bucket, returning the bounds.
func tsRange(r TimeSeriesRequest) (from, to time.Time, err error) {
	bad := func(format string, args ...any) error {
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf(format, args...),
			Hint: `start and end are RFC 3339 timestamps like "2025-01-01T00:00:00Z"; bucket is {"unit": "second|minute|hour|day|week|month", "count": n}`}
	}
	if from, err = ParseTime(r.Start); err != nil {
		return from, to, bad("start %q is not a timestamp", r.Start)
	}
	if to, err = ParseTime(r.End); err != nil {
		return from, to, bad("end %q is not a timestamp", r.End)
	}
	if !to.After(from) {
		return from, to, bad("end must be after start")
	}
	if r.MaxPoints < 0 || r.MaxPoints > MaxMaxPoints {
		return from, to, bad("max_points must be 1 to %d", MaxMaxPoints)
	}
	n := r.Bucket.Count
	if n == 0 {
		n = 1
	}
	if n < 1 || n > maxBuckets {
		return from, to, bad("bucket count must be 1 to %d", maxBuckets)
	}
	var buckets float64
	if r.Bucket.Unit == "month" {
		months := (to.Year()-from.Year())*12 + int(to.Month()-from.Month()) + 1
		buckets = float64(months) / float64(n)
	} else if w, ok := bucketUnits[r.Bucket.Unit]; ok {
		buckets = float64(to.Sub(from)) / (float64(w) * float64(n))
	} else {
		return from, to, bad("unknown bucket unit %q", r.Bucket.Unit)
	}
	if buckets > maxBuckets {
		return from, to, bad("the range spans about %.0f buckets; the limit is %d", buckets, maxBuckets)
	}
	return from.UTC(), to.UTC(), nil
}

// sqliteBucketTime is how SQLite's buckets are written (sqliteBucket).
const sqliteBucketTime = "2006-01-02T15:04:05Z"

// DefaultMaxPoints and MaxMaxPoints bound the buckets of a chosen width.
const (
	DefaultMaxPoints = 300
	MaxMaxPoints     = 10_000
)

// BucketLadder are the round widths a chosen bucket takes, narrowest
// first.
var BucketLadder = []Bucket{
	{"second", 1}, {"second", 5}, {"second", 10}, {"second", 15}, {"second", 30},
	{"minute", 1}, {"minute", 5}, {"minute", 10}, {"minute", 15}, {"minute", 30},
	{"hour", 1}, {"hour", 2}, {"hour", 3}, {"hour", 6}, {"hour", 12},
	{"day", 1}, {"week", 1}, {"month", 1}, {"month", 3}, {"month", 12},
}

// ChooseBucket is the narrowest width of BucketLadder that spans
// [from, to) in at most maxPoints buckets (0: DefaultMaxPoints); the
// widest when none does.
func ChooseBucket(from, to time.Time, maxPoints int) Bucket {
	if maxPoints <= 0 {
		maxPoints = DefaultMaxPoints
	}
	for _, b := range BucketLadder {
		if BucketsIn(b, from, to) <= maxPoints {
			return b
		}
	}
	return BucketLadder[len(BucketLadder)-1]
}

// BucketStart is the start of the bucket of width b that holds t, as both
// dialects' SQL buckets it (UTC; fixed widths from a Monday in 2000,
// months from year 0).
func BucketStart(b Bucket, t time.Time) time.Time {
	n := max(b.Count, 1)
	t = t.UTC()
	if b.Unit == "month" {
		m := t.Year()*12 + int(t.Month()) - 1
		m -= ((m % n) + n) % n
		return time.Date(m/12, time.Month(m%12+1), 1, 0, 0, 0, 0, time.UTC)
	}
	w := time.Duration(n) * bucketUnits[b.Unit]
	d := t.Sub(bucketOrigin)
	k := d / w
	if d%w < 0 {
		k--
	}
	return bucketOrigin.Add(k * w)
}

// NextBucket is the start of the bucket after the one starting at t.
func NextBucket(b Bucket, t time.Time) time.Time {
	n := max(b.Count, 1)
	if b.Unit == "month" {
		return t.AddDate(0, n, 0)
	}
	return t.Add(time.Duration(n) * bucketUnits[b.Unit])
}

// BucketsIn counts the buckets of width b that [from, to) touches.
func BucketsIn(b Bucket, from, to time.Time) int {
	first, last := BucketStart(b, from), BucketStart(b, to.Add(-time.Nanosecond))
	if b.Unit == "month" {
		m := func(t time.Time) int { return t.Year()*12 + int(t.Month()) }
		return (m(last)-m(first))/max(b.Count, 1) + 1
	}
	return int(last.Sub(first)/(time.Duration(max(b.Count, 1))*bucketUnits[b.Unit])) + 1
}

// pgBucket writes the bucket start (a timestamptz) of column col: date_bin for fixed
// widths, date_trunc for one month, month arithmetic for several.
func (w *writer) pgBucket(col string, kind Kind, b Bucket) {
	n := max(b.Count, 1)
	typ := "timestamptz"
	if kind != KindTimestamptz {
		typ = "timestamp"
		if kind == KindDate {
			col = "CAST(" + col + " AS timestamp)"
		}
		// The bucket of a timestamp without zone is read as UTC, so that
		// every bucket is a timestamptz written in RFC 3339 UTC.
		w.b.WriteString("(")
		defer w.b.WriteString(") AT TIME ZONE 'UTC'")
	}
	utc := func(x string) string {
		if typ == "timestamptz" {
			return x + " AT TIME ZONE 'UTC'"
		}
		return x
	}
	switch {
	case b.Unit != "month":
		w.b.WriteString("date_bin(")
		w.param(pgInterval(time.Duration(n) * bucketUnits[b.Unit]))
		w.b.WriteString(", " + col + ", CAST(")
		w.param(bucketOrigin)
		w.b.WriteString(" AS " + typ + "))")
	case n == 1 && typ == "timestamptz":
		w.b.WriteString("date_trunc('month', " + col + ", 'UTC')")
	case n == 1:
		w.b.WriteString("date_trunc('month', " + col + ")")
	default:
		// m counts months from year 0; buckets of n months start where
		// m is a multiple of n (n = 3: quarters, 12: years).
		m := "(CAST(extract(year FROM " + utc(col) + ") AS int) * 12 + CAST(extract(month FROM " + utc(col) + ") AS int) - 1)"
		w.b.WriteString("make_" + typ + "(")
		w.yearMonth(m, n)
		w.b.WriteString(", 1, 0, 0, 0")
		if typ == "timestamptz" {
			w.b.WriteString(", 'UTC'")
		}
		w.b.WriteString(")")
	}
}

// yearMonth writes the year and the month (1 to 12) that the n-month
// bucket of m starts in, m an expression counting months from year 0:
// "year, month".
func (w *writer) yearMonth(m string, n int) {
	w.b.WriteString(m + " / ")
	w.param(n)
	w.b.WriteString(" * ")
	w.param(n)
	w.b.WriteString(" / 12, " + m + " / ")
	w.param(n)
	w.b.WriteString(" * ")
	w.param(n)
	w.b.WriteString(" % 12 + 1")
}

// sqliteBucket writes the bucket start of col (ISO text) as RFC 3339
// text, with strftime arithmetic on Unix seconds or months.
func (w *writer) sqliteBucket(col string, b Bucket) {
	n := max(b.Count, 1)
	if b.Unit == "month" {
		m := "(CAST(strftime('%Y', " + col + ") AS INTEGER) * 12 + CAST(strftime('%m', " + col + ") AS INTEGER) - 1)"
		w.b.WriteString("printf('%04d-%02d-01T00:00:00Z', ")
		w.yearMonth(m, n)
		w.b.WriteString(")")
		return
	}
	width := int64(time.Duration(n) * bucketUnits[b.Unit] / time.Second)
	e := "CAST(strftime('%s', " + col + ") AS INTEGER)"
	w.b.WriteString("strftime('%Y-%m-%dT%H:%M:%SZ', " + e + " - ((" + e + " - ")
	w.param(bucketOrigin.Unix())
	w.b.WriteString(") % ")
	w.param(width)
	w.b.WriteString(" + ")
	w.param(width)
	w.b.WriteString(") % ")
	w.param(width)
	w.b.WriteString(", 'unixepoch')")
}

// pgInterval is d as a PostgreSQL interval.
func pgInterval(d time.Duration) pgtype.Interval {
	return pgtype.Interval{Microseconds: d.Microseconds(), Valid: true}
}
