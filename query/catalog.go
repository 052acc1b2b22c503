package query

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate"
)

// colKind is how a column's values are converted on the way in (filters,
// Insert); it abstracts over both dialects' type names.
type colKind int

const (
	kindAny colKind = iota // unknown type: values pass as given
	kindText
	kindInt
	kindFloat
	kindNumeric
	kindBool
	kindDate
	kindTimestamptz
	kindTimestamp
	kindBytes
	kindUUID
	kindJSON
	kindInterval
	kindArray
)

// colType is the input type of one column.
type colType struct {
	kind colKind
	// bits bounds kindInt (16, 32 or 64).
	bits int
	// name is the database's type name, for error messages.
	name string
	// elem is the element type of kindArray.
	elem *colType
}

// describe says in words what a column of this type accepts.
func (t colType) describe() string {
	switch t.kind {
	case kindText:
		return "a string"
	case kindInt:
		return fmt.Sprintf("an integer (%s)", t.name)
	case kindFloat:
		return fmt.Sprintf("a number (%s)", t.name)
	case kindNumeric:
		return fmt.Sprintf("a number or a decimal string (%s)", t.name)
	case kindBool:
		return "a boolean"
	case kindDate:
		return "a date string YYYY-MM-DD"
	case kindTimestamptz, kindTimestamp:
		return "an RFC 3339 timestamp string"
	case kindBytes:
		return "a base64 string"
	case kindUUID:
		return "a UUID string"
	case kindJSON:
		return "a JSON value"
	case kindInterval:
		return "an interval string like '1 day 02:00:00'"
	case kindArray:
		return fmt.Sprintf("an array of %s", t.elem.describe())
	}
	return fmt.Sprintf("a value of type %s", t.name)
}

// tableInfo is one table of a catalog with what the builder and Insert
// need beyond the public Table.
type tableInfo struct {
	Table
	// schema and rel are the real identifiers (schema is empty for SQLite).
	schema, rel string
	// types is aligned with Table.Columns.
	types []colType
	// colIndex maps a column name to its index in Columns.
	colIndex map[string]int
}

func (t *tableInfo) index() {
	t.colIndex = make(map[string]int, len(t.Columns))
	for i, c := range t.Columns {
		t.colIndex[c.Name] = i
	}
}

func (t *tableInfo) columnNames() []string {
	out := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = c.Name
	}
	return out
}

// column finds a column by exact name, then by a unique case-insensitive
// match; else it returns a validation error with close matches.
func (t *tableInfo) column(name string) (int, error) {
	if i, ok := t.colIndex[name]; ok {
		return i, nil
	}
	if i, ok := foldMatch(name, len(t.Columns), func(i int) string { return t.Columns[i].Name }); ok {
		return i, nil
	}
	return -1, &lakegate.Error{
		Kind:    lakegate.KindValidation,
		Message: fmt.Sprintf("unknown column %q in table %q", name, t.Name),
		Hint:    namesHint("columns", name, t.columnNames()),
	}
}

// catalog is an immutable snapshot of one database's tables.
type catalog struct {
	tables []*tableInfo // sorted by Name
	byName map[string]*tableInfo
	loaded time.Time
}

// catalogCache holds the current catalog of one database.
type catalogCache struct {
	mu  sync.Mutex
	cur *catalog
}

func newCatalog(tables []*tableInfo) *catalog {
	sort.Slice(tables, func(i, j int) bool { return tables[i].Name < tables[j].Name })
	c := &catalog{tables: tables, byName: make(map[string]*tableInfo, len(tables)), loaded: time.Now()}
	for _, t := range tables {
		t.index()
		c.byName[t.Name] = t
	}
	return c
}

// table finds a table by its name (also "public.x" for x), then by a unique
// case-insensitive match; else it returns not_found with close matches.
func (c *catalog) table(db, name string) (*tableInfo, error) {
	if t, ok := c.byName[name]; ok {
		return t, nil
	}
	if t, ok := c.byName[strings.TrimPrefix(name, "public.")]; ok && t.schema == "public" {
		return t, nil
	}
	if i, ok := foldMatch(name, len(c.tables), func(i int) string { return c.tables[i].Name }); ok {
		return c.tables[i], nil
	}
	names := make([]string, len(c.tables))
	for i, t := range c.tables {
		names[i] = t.Name
	}
	return nil, &lakegate.Error{
		Kind:    lakegate.KindNotFound,
		Message: fmt.Sprintf("unknown table %q in database %q", name, db),
		Hint:    namesHint("tables", name, names),
	}
}

// foldMatch returns the only index whose name equals name ignoring case.
func foldMatch(name string, n int, at func(int) string) (int, bool) {
	found := -1
	for i := range n {
		if strings.EqualFold(at(i), name) {
			if found >= 0 {
				return -1, false
			}
			found = i
		}
	}
	return found, found >= 0
}

// closeMatches returns up to 3 names within a small edit distance of name,
// closest first, ignoring case. Only names at most one edit further than
// the closest are kept, so that a name one typo away is not drowned by
// names further off.
func closeMatches(name string, known []string) []string {
	type cand struct {
		name string
		d    int
	}
	max := len([]rune(name))/3 + 1
	if max > 3 {
		max = 3
	}
	var cs []cand
	lower := strings.ToLower(name)
	for _, k := range known {
		if d := editDistance(lower, strings.ToLower(k)); d <= max {
			cs = append(cs, cand{k, d})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].name < cs[j].name
	})
	var out []string
	for i := 0; i < len(cs) && i < 3 && cs[i].d <= cs[0].d+1; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// editDistance is the optimal string alignment distance between a and b,
// in runes: Levenshtein's insertions, deletions and substitutions, plus
// the swap of two adjacent runes ("lenght" for "length"), each one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows: i-2, i-1 and i.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// sqliteType maps an SQLite declared type to an input type, following
// SQLite's affinity rules plus the usual date, time and boolean names.
func sqliteType(decl string) colType {
	u := strings.ToUpper(strings.TrimSpace(decl))
	name := strings.ToLower(decl)
	if name == "" {
		name = "any"
	}
	t := colType{name: name}
	switch {
	case strings.Contains(u, "INT"):
		t.kind, t.bits = kindInt, 64
	case strings.HasPrefix(u, "BOOL"):
		t.kind = kindBool
	case strings.HasPrefix(u, "DATETIME"), strings.HasPrefix(u, "TIMESTAMP"):
		t.kind = kindTimestamptz
	case strings.HasPrefix(u, "DATE"):
		t.kind = kindDate
	case strings.Contains(u, "JSON"):
		t.kind = kindJSON
	case strings.Contains(u, "CHAR"), strings.Contains(u, "CLOB"), strings.Contains(u, "TEXT"):
		t.kind = kindText
	case u == "":
		t.kind = kindAny
	case strings.Contains(u, "BLOB"):
		t.kind = kindBytes
	case strings.Contains(u, "REAL"), strings.Contains(u, "FLOA"), strings.Contains(u, "DOUB"):
		t.kind = kindFloat
	default:
		t.kind = kindNumeric
	}
	return t
}

// pgType maps a PostgreSQL base type name (pg_type.typname, domains
// resolved) to an input type; elem is the element's typname for arrays.
func pgType(typname, elem string) colType {
	t := colType{name: typname}
	switch typname {
	case "int2":
		t.kind, t.bits = kindInt, 16
	case "int4":
		t.kind, t.bits = kindInt, 32
	case "int8":
		t.kind, t.bits = kindInt, 64
	case "float4", "float8":
		t.kind = kindFloat
	case "numeric":
		t.kind = kindNumeric
	case "bool":
		t.kind = kindBool
	case "date":
		t.kind = kindDate
	case "timestamptz":
		t.kind = kindTimestamptz
	case "timestamp":
		t.kind = kindTimestamp
	case "bytea":
		t.kind = kindBytes
	case "uuid":
		t.kind = kindUUID
	case "json", "jsonb":
		t.kind = kindJSON
	case "interval":
		t.kind = kindInterval
	case "text", "varchar", "bpchar", "name", "citext":
		t.kind = kindText
	default:
		if elem != "" {
			e := pgType(elem, "")
			t.kind, t.elem, t.name = kindArray, &e, elem+"[]"
		}
	}
	return t
}
