package sqlbuild

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lakegate/lakegate"
)

// Rollups: tables of partial aggregates that lakegate keeps beside a table
// of readings. One row per bucket of the rollup's resolution and key
// values holds the rows' count and, per value column, the count of its
// values, their sum, min and max: the parts count, sum, avg, min and max
// of any coarser bucket are made of.

// The columns every rollup has; a value column v adds v_count, v_sum,
// v_min and v_max (RollupPart).
const (
	RollupBucket = "lakegate_bucket"
	RollupRows   = "lakegate_rows"
)

// rollupParts are the parts kept of each value column, in column order.
var rollupParts = [...]string{"count", "sum", "min", "max"}

// RollupPart names the column of a rollup holding part ("count", "sum",
// "min" or "max") of value column v.
func RollupPart(v, part string) string { return v + "_" + part }

// Rollup is one rollup of a table at one resolution.
type Rollup struct {
	// Table is the rollup table as the builder reads it. Its Name is the
	// source's, so that filters naming "table.column" read it too.
	Table *Table
	// TimeColumn, Keys and Values are columns of the source: Keys are
	// kept per row of the rollup, Values aggregated.
	TimeColumn   string
	Keys, Values []string
	// Resolution is the rollup's bucket width: second, minute, hour or
	// day units.
	Resolution Bucket

	d        Dialect
	timeKind Kind
	// valueTypes are the source's value column types.
	valueTypes []Type
}

// NewRollup describes the rollup named rel (in src's schema) of src's
// values by its time column and keys, at resolution res. The time column
// must be a timestamptz in PostgreSQL (ISO text in SQLite), the values
// integer or floating point.
func NewRollup(d Dialect, src *Table, rel, timeColumn string, keys, values []string, res Bucket) (*Rollup, error) {
	bad := func(format string, args ...any) error {
		return lakegate.Errorf(lakegate.KindValidation, "rollup %s of %q: "+format, append([]any{rel, src.Name}, args...)...)
	}
	if _, ok := bucketUnits[res.Unit]; !ok || res.Unit == "week" || res.Count < 1 {
		return nil, bad("resolution %d %s: want a count of seconds, minutes, hours or days", res.Count, res.Unit)
	}
	if time.Duration(res.Count)*bucketUnits[res.Unit] > 24*time.Hour {
		return nil, bad("resolution %d %s: at most a day", res.Count, res.Unit)
	}
	col := func(name string) (Column, error) {
		i, err := src.Column(name)
		if err != nil {
			return Column{}, err
		}
		return src.Columns[i], nil
	}
	tc, err := col(timeColumn)
	if err != nil {
		return nil, err
	}
	switch k := tc.Type.Kind; {
	case d == Postgres && k == KindTimestamptz:
	case d == SQLite && (k == KindText || k == KindAny || k == KindTimestamp || k == KindTimestamptz):
	default:
		return nil, bad("time column %q is %s; rollups need a timestamptz (ISO text in SQLite)", tc.Name, tc.Type.Name)
	}
	r := &Rollup{TimeColumn: tc.Name, Resolution: res, d: d, timeKind: tc.Type.Kind}
	bucketType := Type{Kind: KindTimestamptz, Name: "timestamptz"}
	if d == SQLite {
		bucketType = Type{Kind: KindText, Name: "TEXT"}
	}
	cols := []Column{{Name: RollupBucket, Type: bucketType, NotNull: true}}
	seen := map[string]bool{RollupBucket: true, RollupRows: true}
	for _, k := range keys {
		c, err := col(k)
		if err != nil {
			return nil, err
		}
		if seen[c.Name] || c.Name == tc.Name {
			return nil, bad("column %q is named twice", c.Name)
		}
		seen[c.Name] = true
		r.Keys = append(r.Keys, c.Name)
		cols = append(cols, c)
	}
	cols = append(cols, Column{Name: RollupRows, Type: Type{Kind: KindInt, Bits: 64, Name: "int8"}, NotNull: true})
	if len(values) == 0 {
		return nil, bad("no value columns")
	}
	for _, v := range values {
		c, err := col(v)
		if err != nil {
			return nil, err
		}
		if c.Type.Kind != KindInt && c.Type.Kind != KindFloat {
			return nil, bad("value column %q is %s; rollups keep integer and floating-point columns", c.Name, c.Type.Name)
		}
		for _, p := range rollupParts {
			if seen[RollupPart(c.Name, p)] || c.Name == tc.Name {
				return nil, bad("column %q is named twice or clashes with another's part", c.Name)
			}
			seen[RollupPart(c.Name, p)] = true
		}
		r.Values = append(r.Values, c.Name)
		r.valueTypes = append(r.valueTypes, c.Type)
		cols = append(cols,
			Column{Name: RollupPart(c.Name, "count"), Type: Type{Kind: KindInt, Bits: 64, Name: "int8"}, NotNull: true},
			Column{Name: RollupPart(c.Name, "sum"), Type: sumType(d, c.Type)},
			Column{Name: RollupPart(c.Name, "min"), Type: c.Type},
			Column{Name: RollupPart(c.Name, "max"), Type: c.Type})
	}
	if d == Postgres && len(rel) > 63 {
		return nil, bad("the name is longer than PostgreSQL's 63 bytes; name the table or resolution shorter")
	}
	r.Table = NewTable(Table{Name: src.Name, Schema: src.Schema, Rel: rel, Columns: cols})
	return r, nil
}

// sumType is the type a rollup keeps a sum of t in: exact for integers.
func sumType(d Dialect, t Type) Type {
	switch {
	case t.Kind == KindFloat && d == Postgres:
		return Type{Kind: KindFloat, Name: "float8"}
	case t.Kind == KindFloat:
		return Type{Kind: KindFloat, Name: "REAL"}
	case d == Postgres:
		return Type{Kind: KindNumeric, Name: "numeric"}
	}
	return Type{Kind: KindInt, Bits: 64, Name: "INTEGER"}
}

// Width is the rollup's bucket width.
func (r *Rollup) Width() time.Duration {
	return time.Duration(r.Resolution.Count) * bucketUnits[r.Resolution.Unit]
}

// Create is the DDL that makes the rollup's table if it is missing: one
// row per bucket and key values (unique, the key upserts go by).
func (r *Rollup) Create(d Dialect) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + tableRef(d, r.Table) + " (")
	for i, c := range r.Table.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(QuoteIdent(c.Name) + " " + c.Type.Name)
		if c.NotNull {
			b.WriteString(" NOT NULL")
		}
	}
	b.WriteString(", UNIQUE (" + strings.Join(r.uniqueCols(), ", ") + "))")
	if d == Postgres {
		// Room on each page for the new versions of its rows: each ingest
		// updates rows in place (HOT), without touching the index.
		b.WriteString(" WITH (fillfactor = 50)")
	}
	return b.String()
}

func (r *Rollup) uniqueCols() []string {
	out := []string{QuoteIdent(RollupBucket)}
	for _, k := range r.Keys {
		out = append(out, QuoteIdent(k))
	}
	return out
}

// Fill is the statement that computes the whole rollup from src's rows
// (into an empty rollup table).
func (r *Rollup) Fill(d Dialect, src *Table) *Statement {
	w := &writer{d: d}
	s := &scope{d: d, tables: []*Table{src}}
	w.b.WriteString("INSERT INTO " + tableRef(d, r.Table) + " (" + r.columnList() + ") SELECT ")
	r.writeBucket(w, QuoteIdent(r.TimeColumn), r.timeKind)
	for _, k := range r.Keys {
		w.b.WriteString(", " + QuoteIdent(k))
	}
	w.b.WriteString(", count(*)")
	for _, v := range r.Values {
		q := QuoteIdent(v)
		w.b.WriteString(", count(" + q + "), sum(" + q + "), min(" + q + "), max(" + q + ")")
	}
	w.b.WriteString(" FROM " + s.from(0) + " WHERE " + QuoteIdent(r.TimeColumn) + " IS NOT NULL GROUP BY ")
	for i := range len(r.Keys) + 1 {
		if i > 0 {
			w.b.WriteString(", ")
		}
		w.b.WriteString(strconv.Itoa(i + 1))
	}
	return &Statement{Text: w.b.String(), Args: w.args}
}

// writeBucket writes the rollup's bucket of col, a time of kind k.
func (r *Rollup) writeBucket(w *writer, col string, k Kind) {
	if w.d == Postgres {
		w.pgBucket(col, k, r.Resolution)
		return
	}
	w.sqliteBucket(col, r.Resolution)
}

func (r *Rollup) columnList() string {
	cols := make([]string, len(r.Table.Columns))
	for i, c := range r.Table.Columns {
		cols[i] = QuoteIdent(c.Name)
	}
	return strings.Join(cols, ", ")
}

// RowArgs is how many bind arguments one row of Upsert takes: the
// bucket, the keys, the row count and four parts per value.
func (r *Rollup) RowArgs() int { return len(r.Table.Columns) }

// Upsert is the statement that adds n rows of partial aggregates (in
// column order: bucket, keys, row count, then each value's count, sum,
// min and max) to the rollup, merging each into the row of its bucket and
// keys when there is one.
func (r *Rollup) Upsert(d Dialect, n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + tableRef(d, r.Table) + ` AS "lakegate_r" (` + r.columnList() + ") VALUES ")
	arg := 0
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for j := range r.Table.Columns {
			if j > 0 {
				b.WriteString(", ")
			}
			arg++
			if d == Postgres {
				b.WriteString("$" + strconv.Itoa(arg))
			} else {
				b.WriteString("?")
			}
		}
		b.WriteString(")")
	}
	b.WriteString(" ON CONFLICT (" + strings.Join(r.uniqueCols(), ", ") + ") DO UPDATE SET ")
	set := func(col, expr string) {
		if !strings.HasSuffix(b.String(), "SET ") {
			b.WriteString(", ")
		}
		b.WriteString(QuoteIdent(col) + " = " + expr)
	}
	old := func(col string) string { return `"lakegate_r".` + QuoteIdent(col) }
	add := func(col string) string { return `excluded.` + QuoteIdent(col) }
	set(RollupRows, old(RollupRows)+" + "+add(RollupRows))
	least, greatest := "least", "greatest"
	if d == SQLite {
		least, greatest = "min", "max"
	}
	for _, v := range r.Values {
		c, s, lo, hi := RollupPart(v, "count"), RollupPart(v, "sum"), RollupPart(v, "min"), RollupPart(v, "max")
		set(c, old(c)+" + "+add(c))
		set(s, "coalesce("+old(s)+" + "+add(s)+", "+old(s)+", "+add(s)+")")
		// Both dialects' two-argument min and max, NULL-safe.
		set(lo, least+"(coalesce("+old(lo)+", "+add(lo)+"), coalesce("+add(lo)+", "+old(lo)+"))")
		set(hi, greatest+"(coalesce("+old(hi)+", "+add(hi)+"), coalesce("+add(hi)+", "+old(hi)+"))")
	}
	return b.String()
}

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

// BucketOf is the start of t's bucket, as the rollup's bucket column
// holds it.
func (r *Rollup) BucketOf(t time.Time) any { return r.bucketArg(BucketStart(r.Resolution, t)) }

// bucketArg is t as the rollup's bucket column holds it.
func (r *Rollup) bucketArg(t time.Time) any {
	if r.d == SQLite {
		return t.UTC().Format(sqliteBucketTime)
	}
	return t.UTC()
}

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

// String names the rollup for messages and answers: "readings 1 hour".
func (r *Rollup) String() string {
	return fmt.Sprintf("%s %d %s", r.Table.Name, r.Resolution.Count, r.Resolution.Unit)
}
