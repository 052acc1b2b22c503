package sqlbuild

import (
	"strconv"
	"strings"
	"time"
)

// Reading a rollup: which one answers a time series, and the partial
// aggregates it and the table's rows at the range's edges give.

// pickRollup returns the coarsest of rollups that can answer a series of
// bucket b grouped by groups, filtered by filters, with aggregates aggs
// (all as the request names them), or nil.
func pickRollup(rollups []*Rollup, b Bucket, groups []string, filters []Filter, aggs []Select, timeColumn string) *Rollup {
	var best *Rollup
	for _, r := range rollups {
		if r.TimeColumn != timeColumn || !r.divides(b) || !r.serves(groups, filters, aggs) {
			continue
		}
		if best == nil || r.Width() > best.Width() {
			best = r
		}
	}
	return best
}

// divides reports whether every bucket of b is made of whole buckets of
// the rollup's resolution (both are aligned on bucketOrigin).
func (r *Rollup) divides(b Bucket) bool {
	n := time.Duration(max(b.Count, 1))
	if b.Unit == "month" {
		return 24*time.Hour%r.Width() == 0
	}
	u, ok := bucketUnits[b.Unit]
	return ok && (n*u)%r.Width() == 0
}

// serves reports whether the rollup keeps what groups, filters and aggs
// (names already resolved to the source's columns) read.
func (r *Rollup) serves(groups []string, filters []Filter, aggs []Select) bool {
	isKey := func(c string) bool { return contains(r.Keys, c) }
	for _, g := range groups {
		if !isKey(g) {
			return false
		}
	}
	var keyFilters func(fs []Filter) bool
	keyFilters = func(fs []Filter) bool {
		for _, f := range fs {
			if f.And != nil || f.Or != nil {
				if !keyFilters(f.And) || !keyFilters(f.Or) {
					return false
				}
				continue
			}
			if f.Agg != "" || !isKey(f.Column) {
				return false
			}
		}
		return true
	}
	if !keyFilters(filters) {
		return false
	}
	for _, a := range aggs {
		switch strings.ToLower(strings.TrimSpace(a.Agg)) {
		case "count":
			if a.Column != "" && !contains(r.Values, a.Column) {
				return false
			}
		case "sum", "avg", "min", "max":
			if !contains(r.Values, a.Column) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// resolveNames is filters with each column named as the table names it
// (a case-insensitive or "table.column" name resolved), for pickRollup;
// a name that does not resolve is kept (the build reports it).
func resolveNames(s *scope, fs []Filter) []Filter {
	out := make([]Filter, len(fs))
	for i, f := range fs {
		out[i] = f
		if f.And != nil {
			out[i].And = resolveNames(s, f.And)
		}
		if f.Or != nil {
			out[i].Or = resolveNames(s, f.Or)
		}
		if f.Column != "" {
			if ref, err := s.resolve(f.Column); err == nil {
				out[i].Column = s.col(ref).Name
			}
		}
	}
	return out
}

// rollupSpan is the part of [from, to) that whole buckets of r cover:
// [a, b), empty when b is not after a.
func (r *Rollup) span(from, to time.Time) (a, b time.Time) {
	a = BucketStart(r.Resolution, from)
	if a.Before(from) {
		a = a.Add(r.Width())
	}
	return a, BucketStart(r.Resolution, to)
}

// writePartials writes, for a series of bucket b over [from, to) of the
// source in scope s, the partial aggregates of each bucket and group: the
// rollup's whole buckets inside the range, and the source's rows at the
// range's edges (before the first whole bucket, from the last one's
// end), which also keeps the caller's privileges on the source checked.
// Each partial row has "bucket", the groups, "lakegate_n" and per value
// v_i "lakegate_{i}_count|sum|min|max".
func (r *Rollup) writePartials(w *writer, s *scope, b Bucket, groups []colRef, filters []Filter, from, to time.Time) error {
	a, z := r.span(from, to)
	rs := &scope{d: w.d, tables: []*Table{r.Table}}
	w.b.WriteString("SELECT ")
	if w.d == Postgres {
		w.pgBucket(QuoteIdent(RollupBucket), KindTimestamptz, b)
	} else {
		w.sqliteBucket(QuoteIdent(RollupBucket), b)
	}
	w.b.WriteString(` AS "bucket"`)
	for _, g := range groups {
		w.b.WriteString(", " + QuoteIdent(s.col(g).Name))
	}
	w.b.WriteString(`, ` + QuoteIdent(RollupRows) + ` AS "lakegate_n"`)
	for i, v := range r.Values {
		for _, p := range rollupParts {
			w.b.WriteString(", " + QuoteIdent(RollupPart(v, p)) + " AS " + partAlias(i, p))
		}
	}
	w.b.WriteString(" FROM " + rs.from(0) + " WHERE " + QuoteIdent(RollupBucket) + " >= ")
	w.param(r.bucketArg(a))
	w.b.WriteString(" AND " + QuoteIdent(RollupBucket) + " < ")
	w.param(r.bucketArg(z))
	for _, f := range filters {
		w.b.WriteString(" AND ")
		if err := w.cond(rs, f, 1, nil); err != nil {
			return err
		}
	}
	// The edges, from the source's rows.
	w.b.WriteString(" UNION ALL SELECT ")
	ts, err := s.resolve(r.TimeColumn)
	if err != nil {
		return err
	}
	if w.d == Postgres {
		w.pgBucket(s.expr(ts), r.timeKind, b)
	} else {
		w.sqliteBucket(s.expr(ts), b)
	}
	for _, g := range groups {
		w.b.WriteString(", " + s.expr(g))
	}
	w.b.WriteString(", count(*)")
	for _, v := range r.Values {
		q := QuoteIdent(v)
		w.b.WriteString(", count(" + q + "), sum(" + q + "), min(" + q + "), max(" + q + ")")
	}
	w.b.WriteString(" FROM " + s.from(0) + " WHERE ((")
	edge := func(lo, hi time.Time) error {
		for i, f := range []Filter{{Column: r.TimeColumn, Op: ">=", Value: r.timeArg(lo)}, {Column: r.TimeColumn, Op: "<", Value: r.timeArg(hi)}} {
			if i > 0 {
				w.b.WriteString(" AND ")
			}
			if err := w.cond(s, f, 1, nil); err != nil {
				return err
			}
		}
		return nil
	}
	if !a.Before(z) {
		a, z = to, to // no whole bucket: the source answers all
	}
	if err := edge(from, a); err != nil {
		return err
	}
	w.b.WriteString(") OR (")
	if err := edge(z, to); err != nil {
		return err
	}
	w.b.WriteString("))")
	for _, f := range filters {
		w.b.WriteString(" AND ")
		if err := w.cond(s, f, 1, nil); err != nil {
			return err
		}
	}
	w.b.WriteString(" GROUP BY ")
	for i := range len(groups) + 1 {
		if i > 0 {
			w.b.WriteString(", ")
		}
		w.b.WriteString(strconv.Itoa(i + 1))
	}
	return nil
}

// partAlias names part p of the i-th value in the partials.
func partAlias(i int, p string) string { return `"lakegate_` + strconv.Itoa(i) + "_" + p + `"` }

// timeArg is t as a filter value on the source's time column.
func (r *Rollup) timeArg(t time.Time) any {
	if r.d == SQLite {
		return t.UTC().Format(SQLiteTime) // ISO text compares as text
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// combine is the aggregate sel of the source, made of the partials'
// columns (writePartials), typed as the source's own aggregate would be.
func (r *Rollup) combine(d Dialect, sel Select) string {
	agg := strings.ToLower(strings.TrimSpace(sel.Agg))
	if agg == "count" && sel.Column == "" {
		return castPG(d, `sum("lakegate_n")`, "bigint")
	}
	i := 0
	for i < len(r.Values) && r.Values[i] != sel.Column {
		i++
	}
	t := r.valueTypes[i]
	part := func(p string) string { return partAlias(i, p) }
	switch agg {
	case "count":
		return castPG(d, "sum("+part("count")+")", "bigint")
	case "min", "max":
		return agg + "(" + part(agg) + ")"
	case "sum":
		return castPG(d, "sum("+part("sum")+")", pgSumType(t))
	}
	// avg
	if d == SQLite {
		return "CAST(sum(" + part("sum") + ") AS REAL) / sum(" + part("count") + ")"
	}
	if t.Kind == KindFloat {
		return "CAST(sum(" + part("sum") + ") AS double precision) / CAST(NULLIF(sum(" + part("count") + "), 0) AS double precision)"
	}
	return "CAST(sum(" + part("sum") + ") AS numeric) / NULLIF(sum(" + part("count") + "), 0)"
}

// pgSumType is the type PostgreSQL's sum of a column of type t has.
func pgSumType(t Type) string {
	switch {
	case t.Kind == KindFloat && (t.Name == "float4" || t.Name == "real"):
		return "real"
	case t.Kind == KindFloat:
		return "double precision"
	case t.Bits == 64:
		return "numeric"
	}
	return "bigint"
}

func castPG(d Dialect, expr, typ string) string {
	if d != Postgres {
		return expr
	}
	return "CAST(" + expr + " AS " + typ + ")"
}
