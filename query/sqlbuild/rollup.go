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
// keys when there is one. In SQLite its arguments are the rows' values,
// row after row. In PostgreSQL they are one array per column, whatever n:
// one short statement, planned once.
func (r *Rollup) Upsert(d Dialect, n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + tableRef(d, r.Table) + ` AS "lakegate_r" (` + r.columnList() + ") ")
	if d == Postgres {
		b.WriteString("SELECT * FROM unnest(")
		for j, c := range r.Table.Columns {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("CAST($" + strconv.Itoa(j+1) + " AS " + c.Type.Name + "[])")
		}
		b.WriteString(")")
	} else {
		b.WriteString("VALUES ")
		row := "(" + strings.Repeat("?, ", len(r.Table.Columns)-1) + "?)"
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(row)
		}
	}
	b.WriteString(" ON CONFLICT (" + strings.Join(r.uniqueCols(), ", ") + ") DO UPDATE SET ")
	old := func(col string) string { return `"lakegate_r".` + QuoteIdent(col) }
	add := func(col string) string { return `excluded.` + QuoteIdent(col) }
	sets := []string{QuoteIdent(RollupRows) + " = " + old(RollupRows) + " + " + add(RollupRows)}
	least, greatest := "least", "greatest"
	if d == SQLite {
		least, greatest = "min", "max"
	}
	for _, v := range r.Values {
		c, s, lo, hi := RollupPart(v, "count"), RollupPart(v, "sum"), RollupPart(v, "min"), RollupPart(v, "max")
		sets = append(sets,
			QuoteIdent(c)+" = "+old(c)+" + "+add(c),
			QuoteIdent(s)+" = coalesce("+old(s)+" + "+add(s)+", "+old(s)+", "+add(s)+")",
			// Both dialects' two-argument min and max, NULL-safe.
			QuoteIdent(lo)+" = "+least+"(coalesce("+old(lo)+", "+add(lo)+"), coalesce("+add(lo)+", "+old(lo)+"))",
			QuoteIdent(hi)+" = "+greatest+"(coalesce("+old(hi)+", "+add(hi)+"), coalesce("+add(hi)+", "+old(hi)+"))")
	}
	b.WriteString(strings.Join(sets, ", "))
	return b.String()
}

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

// String names the rollup for messages and answers: "readings 1 hour".
func (r *Rollup) String() string {
	return fmt.Sprintf("%s %d %s", r.Table.Name, r.Resolution.Count, r.Resolution.Unit)
}
