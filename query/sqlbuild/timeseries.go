package sqlbuild

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/lakegate/lakegate"
)

// Series is what a built time series is, for the engine that reads its
// rows for gaps: the bucket width, the first and last bucket starts of
// the range, the number of group columns (after the bucket), and, with
// a fill, the hidden column that marks a filled (empty) bucket.
type Series struct {
	Bucket      Bucket
	First, Last time.Time
	Groups      int
	Fill        string
	GapCol      int // -1: no fill
	// Rollup names the rollup the whole buckets inside the range were
	// read from; empty: the source's rows.
	Rollup string
}

// BuildTimeSeries makes r into one SELECT of dialect d on the table cat
// gives, without LIMIT: one row per bucket with rows (and group) in the
// range: the bucket's start as an RFC 3339 UTC timestamp, the group
// columns, then the aggregates; ordered by group then bucket, so that
// each series is whole and the order total (Keys: keyset paging). Empty
// buckets are not returned, unless r.Fill asks for them (a hidden
// column, Statement.Series.GapCol, marks them).
func BuildTimeSeries(d Dialect, cat Catalog, r TimeSeriesRequest) (*Statement, error) {
	return BuildTimeSeriesAfter(d, cat, r, nil, nil)
}

// BuildTimeSeriesAfter is BuildTimeSeries for the rows after after, the
// keys (Statement.Keys) of a row of the same request's result.
//
// rollups are the table's rollups the caller may read: the coarsest that
// divides the bucket and keeps what the request reads answers the whole
// buckets inside the range (Statement.Rollup names it), the source's rows
// the range's edges.
func BuildTimeSeriesAfter(d Dialect, cat Catalog, r TimeSeriesRequest, after []any, rollups []*Rollup) (*Statement, error) {
	t, err := cat.Table(r.Table)
	if err != nil {
		return nil, err
	}
	if r.Bucket.Unit == "" {
		if from, ferr := ParseTime(r.Start); ferr == nil {
			if to, terr := ParseTime(r.End); terr == nil && to.After(from) {
				r.Bucket = ChooseBucket(from, to, r.MaxPoints)
			}
		}
	}
	from, to, err := tsRange(r)
	if err != nil {
		return nil, err
	}
	fill := strings.ToLower(strings.TrimSpace(r.Fill))
	switch fill {
	case "", "null", "previous":
	default:
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("fill %q: want null or previous", r.Fill),
			Hint: `fill "null" gives empty buckets NULL aggregates (count 0), "previous" the last bucket's; without fill, gaps are listed, not rows`}
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
	// Filled, or continued after a row's keys, the series is read from a
	// subquery (its output names are what the keys compare).
	wrap := fill != "" || after != nil
	if wrap {
		w.b.WriteString("SELECT * FROM (")
	}
	withAt := w.b.Len()
	if fill != "" {
		w.b.WriteString(`WITH "lakegate_a" AS (`)
	}
	// The buckets with rows: what the request reads, then from the
	// source's rows or a rollup's.
	seen := map[string]bool{"bucket": true}
	var groups []colRef
	var groupNames []string
	for _, g := range r.GroupBy {
		ref, err := s.resolve(g)
		if err != nil {
			return nil, err
		}
		if seen[s.col(ref).Name] {
			return nil, lakegate.Errorf(lakegate.KindValidation, "group_by column %q is given twice or named bucket", g)
		}
		seen[s.col(ref).Name] = true
		groups = append(groups, ref)
		groupNames = append(groupNames, s.col(ref).Name)
	}
	aggs := r.Aggregates
	if len(aggs) == 0 && len(r.Values) > 0 {
		aggs = []Select{{Agg: "count"}}
		for _, v := range r.Values {
			aggs = append(aggs, Select{Agg: "min", Column: v}, Select{Agg: "avg", Column: v}, Select{Agg: "max", Column: v})
		}
	}
	if len(aggs) == 0 {
		aggs = []Select{{Agg: "count"}}
	}
	var built []aggregate
	resolved := make([]Select, len(aggs))
	for i, sel := range aggs {
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
		built = append(built, a)
		resolved[i] = Select{Agg: sel.Agg}
		if sel.Column != "" {
			ref, _ := s.resolve(sel.Column) // resolved by aggregate
			resolved[i].Column = s.col(ref).Name
		}
	}
	used := pickRollup(rollups, r.Bucket, groupNames, resolveNames(s, r.Filters), resolved, s.col(ts).Name)
	cols := make([]string, len(groups)+1)
	for i := range cols {
		cols[i] = strconv.Itoa(i + 1)
	}
	if used != nil {
		w.b.WriteString(`SELECT "bucket"`)
		for _, n := range groupNames {
			w.b.WriteString(", " + QuoteIdent(n))
		}
		for i, a := range built {
			w.b.WriteString(", " + used.combine(d, resolved[i]) + " AS " + QuoteIdent(a.alias))
		}
		w.b.WriteString(" FROM (")
		if err := used.writePartials(w, s, r.Bucket, groups, r.Filters, from, to); err != nil {
			return nil, err
		}
		w.b.WriteString(`) AS "lakegate_p" GROUP BY ` + strings.Join(cols, ", "))
	} else if err := w.rawBuckets(s, r, ts, kind, groups, built, from, to); err != nil {
		return nil, err
	}
	series := &Series{Bucket: r.Bucket, First: BucketStart(r.Bucket, from), Last: BucketStart(r.Bucket, to.Add(-time.Nanosecond)),
		Groups: len(groups), Fill: fill, GapCol: -1}
	if used != nil {
		series.Rollup = used.String()
	}
	hidden := 0
	if fill != "" {
		w.b.WriteString(")")
		w.grid(s, series, groups, built, withAt)
		series.GapCol, hidden = 1+len(groups)+len(built), 1
	}
	if wrap {
		w.b.WriteString(`) AS "lakegate_ts"`)
	}
	// The order: each series whole, by bucket.
	var keys []Key
	for i, ref := range groups {
		keys = append(keys, Key{Col: 1 + i, NullsFirst: d != Postgres, NotNull: s.notNull(ref), expr: QuoteIdent(s.col(ref).Name), typ: s.typeOf(ref)})
	}
	bucket := Key{Col: 0, NotNull: true, expr: `"bucket"`}
	if d == Postgres {
		bucket.typ = &Type{Kind: KindTimestamptz, Name: "timestamptz"}
	}
	keys = append(keys, bucket)
	if after != nil {
		if len(after) != len(keys) {
			return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "the cursor does not fit this request's order",
				Hint: "pass next_cursor unchanged with the same request, or start again without cursor"}
		}
		if err := w.after(" WHERE ", keys, after); err != nil {
			return nil, err
		}
	}
	w.b.WriteString(" ORDER BY ")
	for i, k := range keys {
		if i > 0 {
			w.b.WriteString(", ")
		}
		w.b.WriteString(k.expr)
	}
	return &Statement{Text: w.b.String(), Args: w.args, Keys: keys, Hidden: hidden, Series: series}, nil
}

// rawBuckets writes the buckets with rows of r from the source's rows in
// scope s: time column ts (of kind), the groups and the aggregates.
func (w *writer) rawBuckets(s *scope, r TimeSeriesRequest, ts colRef, kind Kind, groups []colRef, built []aggregate, from, to time.Time) error {
	w.b.WriteString("SELECT ")
	if w.d == Postgres {
		w.pgBucket(s.expr(ts), kind, r.Bucket)
	} else {
		w.sqliteBucket(s.expr(ts), r.Bucket)
	}
	w.b.WriteString(` AS "bucket"`)
	for _, g := range groups {
		w.b.WriteString(", " + s.expr(g))
	}
	for _, a := range built {
		w.b.WriteString(", " + a.expr + " AS " + QuoteIdent(a.alias))
	}
	w.b.WriteString(" FROM " + s.from(0) + " WHERE ")
	rng := []Filter{{Column: r.TimeColumn, Op: ">=", Value: r.Start}, {Column: r.TimeColumn, Op: "<", Value: r.End}}
	if w.d == SQLite && (kind == KindText || kind == KindAny) {
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
			return err
		}
	}
	cols := make([]string, len(groups)+1)
	for i := range cols {
		cols[i] = strconv.Itoa(i + 1)
	}
	w.b.WriteString(" GROUP BY " + strings.Join(cols, ", "))
	return nil
}

// grid writes, after the CTE of the buckets with rows ("lakegate_a"),
// every bucket of the range for every series in it: the empty ones with
// count 0 and the other aggregates NULL (fill null) or the series' last
// ones with rows (fill previous, carried by a run number that counts the
// buckets with rows), and the hidden column marking them.
// withAt is where the CTE starts in the text.
func (w *writer) grid(s *scope, series *Series, groups []colRef, aggs []aggregate, withAt int) {
	names := make([]string, len(groups))
	for i, ref := range groups {
		names[i] = QuoteIdent(s.col(ref).Name)
	}
	// The series: the groups with rows.
	if len(groups) > 0 {
		w.b.WriteString(`, "lakegate_g" AS (SELECT DISTINCT ` + strings.Join(names, ", ") + ` FROM "lakegate_a")`)
	}
	// The buckets, as the aggregate writes them.
	if w.d == Postgres {
		w.b.WriteString(`, "lakegate_s"("bucket") AS (SELECT generate_series(CAST(`)
		w.param(series.First)
		w.b.WriteString(" AS timestamp), CAST(")
		w.param(series.Last)
		w.b.WriteString(" AS timestamp), ")
		n := max(series.Bucket.Count, 1)
		if series.Bucket.Unit == "month" {
			w.param(pgtype.Interval{Months: int32(n), Valid: true})
		} else {
			w.param(pgInterval(time.Duration(n) * bucketUnits[series.Bucket.Unit]))
		}
		w.b.WriteString(") AT TIME ZONE 'UTC')")
	} else {
		step := fmt.Sprintf("+%d seconds", int64(time.Duration(max(series.Bucket.Count, 1))*bucketUnits[series.Bucket.Unit]/time.Second))
		if series.Bucket.Unit == "month" {
			step = fmt.Sprintf("+%d months", max(series.Bucket.Count, 1))
		}
		w.b.WriteString(`, "lakegate_s"("bucket") AS (SELECT `)
		w.param(series.First.Format(sqliteBucketTime))
		w.b.WriteString(` UNION ALL SELECT strftime('%Y-%m-%dT%H:%M:%SZ', "bucket", `)
		w.param(step)
		w.b.WriteString(`) FROM "lakegate_s" WHERE "bucket" < `)
		w.param(series.Last.Format(sqliteBucketTime))
		w.b.WriteString(")")
	}
	prefixed := func(table string, cols []string) []string {
		out := make([]string, len(cols))
		for i, c := range cols {
			out[i] = `"` + table + `".` + c
		}
		return out
	}
	part := ""
	if len(groups) > 0 {
		part = "PARTITION BY " + strings.Join(prefixed("lakegate_g", names), ", ") + " "
	}
	previous := series.Fill == "previous"
	w.b.WriteString(` SELECT "lakegate_s"."bucket"`)
	for _, n := range prefixed("lakegate_g", names) {
		w.b.WriteString(", " + n)
	}
	for _, a := range aggs {
		col := `"lakegate_a".` + QuoteIdent(a.alias)
		if a.typ.Kind == KindInt && strings.HasPrefix(a.expr, "count(") {
			col = "coalesce(" + col + ", 0)"
		}
		w.b.WriteString(", " + col + " AS " + QuoteIdent(a.alias))
	}
	w.b.WriteString(`, "lakegate_a"."bucket" IS NULL AS "lakegate_gap"`)
	if previous {
		w.b.WriteString(`, count("lakegate_a"."bucket") OVER (` + part + `ORDER BY "lakegate_s"."bucket") AS "lakegate_run"`)
	}
	w.b.WriteString(` FROM "lakegate_s"`)
	if len(groups) > 0 {
		w.b.WriteString(` CROSS JOIN "lakegate_g"`)
	}
	w.b.WriteString(` LEFT JOIN "lakegate_a" ON "lakegate_a"."bucket" = "lakegate_s"."bucket"`)
	same := " IS NOT DISTINCT FROM "
	if w.d == SQLite {
		same = " IS "
	}
	for _, n := range names {
		w.b.WriteString(` AND "lakegate_a".` + n + same + `"lakegate_g".` + n)
	}
	if !previous {
		return
	}
	// Carry each series' last values with rows over its empty buckets:
	// the buckets of one run share them.
	inner := w.b.String()
	head, body := inner[:withAt], inner[withAt:]
	w.b.Reset()
	w.b.WriteString(head)
	w.b.WriteString(`SELECT "bucket"`)
	for _, n := range names {
		w.b.WriteString(", " + n)
	}
	runPart := "PARTITION BY "
	for _, n := range names {
		runPart += n + ", "
	}
	runPart += `"lakegate_run" `
	for _, a := range aggs {
		q := QuoteIdent(a.alias)
		if a.typ.Kind == KindInt && strings.HasPrefix(a.expr, "count(") {
			w.b.WriteString(", " + q)
			continue
		}
		w.b.WriteString(", first_value(" + q + ") OVER (" + runPart + `ORDER BY "bucket") AS ` + q)
	}
	w.b.WriteString(`, "lakegate_gap" FROM (` + body + `) AS "lakegate_f"`)
}
