package sqlbuild

import (
	"reflect"
	"strings"
	"testing"

	"github.com/lakegate/lakegate/query/validate"
)

// literals are the only SQL text the builder writes between single
// quotes: units, zones and formats of the time buckets, never a value.
var literals = []string{"'UTC'", "'month'", "'%Y-%m-%dT%H:%M:%SZ'", "'%s'", "'unixepoch'", "'%Y'", "'%m'", "'%04d-%02d-01T00:00:00Z'"}

// splitIdents cuts every quoted identifier out of text: rest has each
// one as ID and each builder literal as L (what remains must be the
// builder's own words), neutral has each one as "c" (the statement's
// shape, whatever the names).
func splitIdents(t *testing.T, text string) (rest, neutral string) {
	t.Helper()
	var r, n strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] != '"' {
			r.WriteByte(text[i])
			n.WriteByte(text[i])
			continue
		}
		for i++; ; i++ {
			if i >= len(text) {
				t.Fatalf("unterminated identifier in %q", text)
			}
			if text[i] == '"' {
				if i+1 < len(text) && text[i+1] == '"' {
					i++
					continue
				}
				break
			}
		}
		r.WriteString("ID")
		n.WriteString(`"c"`)
	}
	rest = r.String()
	for _, l := range literals {
		rest = strings.ReplaceAll(rest, l, "L")
	}
	return rest, n.String()
}

// checkText fails unless text is one SELECT whose words outside quoted
// identifiers are the builder's: no quote, comment, semicolon, backslash,
// NUL or byte outside printable ASCII; the validator must take its shape
// as one SELECT. (With the names in, it may refuse some: NUL, invalid
// UTF-8, system names like pg_*; package query returns those refusals as
// validation errors.)
func checkText(t *testing.T, text string) {
	t.Helper()
	if !strings.HasPrefix(text, "SELECT ") {
		t.Fatalf("not a SELECT: %q", text)
	}
	rest, neutral := splitIdents(t, text)
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if c < ' ' || c > '~' || c == '\'' || c == '"' || c == ';' || c == '\\' || c == '`' {
			t.Fatalf("byte %q outside identifiers in %q", c, text)
		}
	}
	if strings.Contains(rest, "--") || strings.Contains(rest, "/*") {
		t.Fatalf("comment outside identifiers in %q", text)
	}
	if _, err := validate.Check(neutral+" LIMIT 10", nil); err != nil {
		t.Fatalf("the validator refuses %q: %v", neutral, err)
	}
}

// FuzzBuild feeds hostile identifiers (the catalog's table and column,
// and a caller's alias) and values through both builders on both
// dialects: a value must travel as a bind argument and never change the
// text, identifiers must be quoted, and the text must be one SELECT.
func FuzzBuild(f *testing.F) {
	nasty := []string{`'; DROP TABLE t; --`, `"`, `""`, `a"b`, "x\x00y", `\`, `\'`, `/*`, `*/ x`, `--`, `;`,
		"é", "\u202e\u0000", "$1", "?", "$$", `' OR '1'='1`, "SELECT", "\n", "\xff", `"; DELETE FROM x; --`, "`x`", "E'\\''"}
	for i, s := range nasty {
		f.Add(s, nasty[(i+3)%len(nasty)], nasty[(i+7)%len(nasty)], uint8(i))
	}
	ops := []string{"=", "!=", "<", ">=", "like", "ilike", "in", "not_in", "between"}
	f.Fuzz(func(t *testing.T, ident, alias, value string, op uint8) {
		if ident == "" || ident == "id" || ident == "ts" || strings.IndexByte(ident, 0) >= 0 {
			// Catalog names are never empty or NUL; id and ts are taken.
			t.Skip()
		}
		tbl := NewTable(Table{Name: ident, Schema: ident, Rel: ident, PrimaryKey: []string{"id"}, Columns: []Column{
			{Name: "id", Type: PostgresType("int8", "")}, {Name: ident, Type: PostgresType("text", "")}, {Name: "ts", Type: PostgresType("timestamptz", "")}}})
		cat := tables{ident: tbl}
		o := ops[int(op)%len(ops)]
		withValue := func(v string) any {
			switch o {
			case "in", "not_in":
				return []any{v, v + "x"}
			case "between":
				return []any{v, v}
			}
			return v
		}
		request := func(v string) Request {
			return Request{Table: ident, Columns: []Select{{Column: ident}, {Agg: "count", As: alias}},
				Filters: []Filter{{Column: ident, Op: o, Value: withValue(v)}, {Or: []Filter{{Column: "id", Op: "=", Value: 1.0}, {Column: ident, Op: "=", Value: v}}}},
				GroupBy: []string{ident}, Having: []Filter{{Column: alias, Op: ">", Value: 1.0}}, OrderBy: []Order{{Column: alias, Desc: true}}}
		}
		series := func(v string) TimeSeriesRequest {
			return TimeSeriesRequest{Table: ident, TimeColumn: "ts", Bucket: Bucket{Unit: "hour", Count: 2}, Aggregates: []Select{{Agg: "count", As: alias}},
				GroupBy: []string{ident}, Start: "2025-01-01T00:00:00Z", End: "2025-01-02T00:00:00Z", Filters: []Filter{{Column: ident, Op: o, Value: withValue(v)}}}
		}
		for _, d := range []Dialect{Postgres, SQLite} {
			for _, build := range []func(v string) (*Statement, error){
				func(v string) (*Statement, error) { return Build(d, cat, request(v)) },
				func(v string) (*Statement, error) { return BuildTimeSeries(d, cat, series(v)) },
				// The next page: the keys of a row (the count, the group).
				func(v string) (*Statement, error) { return BuildAfter(d, cat, request(v), []any{3.0, v}) },
				// A filled series, after a row's keys (the group, the bucket).
				func(v string) (*Statement, error) {
					r := series(v)
					r.Fill = "previous"
					return BuildTimeSeriesAfter(d, cat, r, []any{v, "2025-01-01T02:00:00Z"}, nil)
				},
				// A series read from a rollup (named after the table).
				func(v string) (*Statement, error) {
					ru, err := NewRollup(d, tbl, ident+"_1h", "ts", []string{ident}, []string{"id"}, Bucket{Unit: "hour", Count: 1})
					if err != nil {
						return nil, err
					}
					st, err := BuildTimeSeriesAfter(d, cat, series(v), nil, []*Rollup{ru})
					if err == nil && st.Series.Rollup == "" {
						t.Fatalf("%s: the rollup was not read: %s", d, st.Text)
					}
					return st, err
				},
			} {
				st, err := build(value)
				tmpl, terr := build("v")
				if (err == nil) != (terr == nil) {
					t.Fatalf("%s: value %q gives error %v, a plain one %v", d, value, err, terr)
				}
				if err != nil {
					continue
				}
				if st.Text != tmpl.Text {
					t.Fatalf("%s: the value changed the text:\n%s\n%s", d, st.Text, tmpl.Text)
				}
				if !containsArg(st.Args, value) {
					t.Fatalf("%s: value %q is not among the arguments %#v", d, value, st.Args)
				}
				if !strings.Contains(st.Text, QuoteIdent(ident)) {
					t.Fatalf("%s: identifier %q is not quoted in %s", d, ident, st.Text)
				}
				checkText(t, st.Text)
			}
		}
	})
}

func containsArg(args []any, v string) bool {
	for _, a := range args {
		if reflect.DeepEqual(a, v) {
			return true
		}
	}
	return false
}
