package sqlbuild

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/lakegate/lakegate"
)

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

// BuildTimeSeries makes r into one SELECT of dialect d on the table cat
// gives, without LIMIT: one row per bucket with rows (and group) in the
// range: the bucket's start as an RFC 3339 UTC timestamp, the group
// columns, then the aggregates; grouped and ordered by bucket then group,
// so the order is total. Empty buckets are not returned.
func BuildTimeSeries(d Dialect, cat Catalog, r TimeSeriesRequest) (*Statement, error) {
	t, err := cat.Table(r.Table)
	if err != nil {
		return nil, err
	}
	from, to, err := tsRange(r)
	if err != nil {
		return nil, err
	}
	s := &scope{d: d, tables: []*Table{t}}
	if r.TimeColumn == "" {
		return nil, lakegate.Errorf(lakegate.KindValidation, "time_column is required")
	}
	ts, err := s.resolve(r.TimeColumn)
	if err != nil {
		return nil, err
	}
	kind := s.typ(ts).Kind
	switch {
	case kind == KindTimestamptz, kind == KindTimestamp, kind == KindDate:
	case d == SQLite && (kind == KindText || kind == KindAny):
	default:
		return nil, &lakegate.Error{Kind: lakegate.KindValidation,
			Message: fmt.Sprintf("time_column %q is %s, not a timestamp or date", r.TimeColumn, s.typ(ts).Name)}
	}
	w := &writer{d: d}
	w.b.WriteString("SELECT ")
	if d == Postgres {
		w.pgBucket(s.expr(ts), kind, r.Bucket)
	} else {
		w.sqliteBucket(s.expr(ts), r.Bucket)
	}
	w.b.WriteString(` AS "bucket"`)
	seen := map[string]bool{"bucket": true}
	for _, g := range r.GroupBy {
		ref, err := s.resolve(g)
		if err != nil {
			return nil, err
		}
		if seen[s.col(ref).Name] {
			return nil, lakegate.Errorf(lakegate.KindValidation, "group_by column %q is given twice or named bucket", g)
		}
		seen[s.col(ref).Name] = true
		w.b.WriteString(", " + s.expr(ref))
	}
	aggs := r.Aggregates
	if len(aggs) == 0 {
		aggs = []Select{{Agg: "count"}}
	}
	for _, sel := range aggs {
		if sel.Agg == "" {
			return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("aggregate %q has no agg", sel.Column), Hint: aggHint}
		}
		a, err := s.aggregate(sel.Agg, sel.Column)
		if err != nil {
			return nil, err
		}
		if sel.As != "" {
			a.alias = sel.As
		}
		if seen[a.alias] {
			return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("output name %q is used twice", a.alias),
				Hint: `give one of them another name with "as"`}
		}
		seen[a.alias] = true
		w.b.WriteString(", " + a.expr + " AS " + QuoteIdent(a.alias))
	}
	w.b.WriteString(" FROM " + s.from(0) + " WHERE ")
	rng := []Filter{{Column: r.TimeColumn, Op: ">=", Value: r.Start}, {Column: r.TimeColumn, Op: "<", Value: r.End}}
	if d == SQLite && (kind == KindText || kind == KindAny) {
		// Stored as fixed-width ISO text: compare in the same form.
		rng[0].Value, rng[1].Value = from.Format(SQLiteTime), to.Format(SQLiteTime)
	}
	if kind == KindDate {
		rng[0].Value, rng[1].Value = from.Format(time.DateOnly), to.Format(time.DateOnly)
		if !to.Equal(to.Truncate(24 * time.Hour)) {
			rng[1].Op = "<="
		}
	}
	for i, f := range append(rng, r.Filters...) {
		if i > 0 {
			w.b.WriteString(" AND ")
		}
		if err := w.cond(s, f, 1, nil); err != nil {
			return nil, err
		}
	}
	cols := make([]string, len(r.GroupBy)+1)
	for i := range cols {
		cols[i] = strconv.Itoa(i + 1)
	}
	w.b.WriteString(" GROUP BY " + strings.Join(cols, ", ") + " ORDER BY " + strings.Join(cols, ", "))
	return &Statement{Text: w.b.String(), Args: w.args}, nil
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
		w.b.WriteString("make_" + typ + "(" + m + " / ")
		w.param(n)
		w.b.WriteString(" * ")
		w.param(n)
		w.b.WriteString(" / 12, " + m + " / ")
		w.param(n)
		w.b.WriteString(" * ")
		w.param(n)
		w.b.WriteString(" % 12 + 1, 1, 0, 0, 0")
		if typ == "timestamptz" {
			w.b.WriteString(", 'UTC'")
		}
		w.b.WriteString(")")
	}
}

// sqliteBucket writes the bucket start of col (ISO text) as RFC 3339
// text, with strftime arithmetic on Unix seconds or months.
func (w *writer) sqliteBucket(col string, b Bucket) {
	n := max(b.Count, 1)
	if b.Unit == "month" {
		m := "(CAST(strftime('%Y', " + col + ") AS INTEGER) * 12 + CAST(strftime('%m', " + col + ") AS INTEGER) - 1)"
		w.b.WriteString("printf('%04d-%02d-01T00:00:00Z', " + m + " / ")
		w.param(n)
		w.b.WriteString(" * ")
		w.param(n)
		w.b.WriteString(" / 12, " + m + " / ")
		w.param(n)
		w.b.WriteString(" * ")
		w.param(n)
		w.b.WriteString(" % 12 + 1)")
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
