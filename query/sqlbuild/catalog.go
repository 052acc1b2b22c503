package sqlbuild

import (
	"fmt"
	"strings"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/internal/names"
)

// Catalog finds a table by the name a request gives it. Its errors (an
// unknown table, one the caller may not read) reach the caller as they
// are. The builder calls it for the request's table and each joined one.
type Catalog interface {
	Table(name string) (*Table, error)
}

// Table is what the builder knows of one table. Make it with NewTable;
// it is then immutable and safe for concurrent use.
type Table struct {
	// Name is the name requests use.
	Name string
	// Schema and Rel are the real identifiers (Schema is empty for SQLite).
	Schema, Rel string
	Columns     []Column
	PrimaryKey  []string
	ForeignKeys []ForeignKey

	index map[string]int // column name to its index in Columns
}

// Column is one column of a Table: its name and input type, and whether
// it is declared NOT NULL.
type Column struct {
	Name    string
	Type    Type
	NotNull bool
}

// ForeignKey links columns of a table to columns of another.
type ForeignKey struct {
	Columns    []string `json:"columns"`
	RefTable   string   `json:"ref_table"`
	RefColumns []string `json:"ref_columns"`
}

// NewTable is t, indexed by column name.
func NewTable(t Table) *Table {
	t.index = make(map[string]int, len(t.Columns))
	for i, c := range t.Columns {
		t.index[c.Name] = i
	}
	return &t
}

// ColumnNames are the names of t's columns, in order.
func (t *Table) ColumnNames() []string {
	out := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = c.Name
	}
	return out
}

// Column finds a column by exact name, then by a unique case-insensitive
// match; else it returns a validation error with close matches.
func (t *Table) Column(name string) (int, error) {
	if i, ok := t.index[name]; ok {
		return i, nil
	}
	if i, ok := names.Fold(name, len(t.Columns), func(i int) string { return t.Columns[i].Name }); ok {
		return i, nil
	}
	return -1, &lakegate.Error{
		Kind:    lakegate.KindValidation,
		Message: fmt.Sprintf("unknown column %q in table %q", name, t.Name),
		Hint:    names.Hint("columns", name, t.ColumnNames()),
	}
}

// Kind is how a column's values are converted on the way in; it
// abstracts over both dialects' type names.
type Kind int

// The kinds of input types.
const (
	KindAny Kind = iota // unknown type: values pass as given
	KindText
	KindInt
	KindFloat
	KindNumeric
	KindBool
	KindDate
	KindTimestamptz
	KindTimestamp
	KindBytes
	KindUUID
	KindJSON
	KindInterval
	KindArray
)

// Type is the input type of one column.
type Type struct {
	Kind Kind
	// Bits bounds KindInt (16, 32 or 64).
	Bits int
	// Name is the database's type name, for error messages.
	Name string
	// Elem is the element type of KindArray.
	Elem *Type
}

// describe says in words what a column of this type accepts.
func (t Type) describe() string {
	switch t.Kind {
	case KindText:
		return "a string"
	case KindInt:
		return fmt.Sprintf("an integer (%s)", t.Name)
	case KindFloat:
		return fmt.Sprintf("a number (%s)", t.Name)
	case KindNumeric:
		return fmt.Sprintf("a number or a decimal string (%s)", t.Name)
	case KindBool:
		return "a boolean"
	case KindDate:
		return "a date string YYYY-MM-DD"
	case KindTimestamptz, KindTimestamp:
		return "an RFC 3339 timestamp string"
	case KindBytes:
		return "a base64 string"
	case KindUUID:
		return "a UUID string"
	case KindJSON:
		return "a JSON value"
	case KindInterval:
		return "an interval string like '1 day 02:00:00'"
	case KindArray:
		return fmt.Sprintf("an array of %s", t.Elem.describe())
	}
	return fmt.Sprintf("a value of type %s", t.Name)
}

// SQLiteType maps an SQLite declared type to an input type, following
// SQLite's affinity rules plus the usual date, time and boolean names.
func SQLiteType(decl string) Type {
	u := strings.ToUpper(strings.TrimSpace(decl))
	name := strings.ToLower(decl)
	if name == "" {
		name = "any"
	}
	t := Type{Name: name}
	switch {
	case strings.Contains(u, "INT"):
		t.Kind, t.Bits = KindInt, 64
	case strings.HasPrefix(u, "BOOL"):
		t.Kind = KindBool
	case strings.HasPrefix(u, "DATETIME"), strings.HasPrefix(u, "TIMESTAMP"):
		t.Kind = KindTimestamptz
	case strings.HasPrefix(u, "DATE"):
		t.Kind = KindDate
	case strings.Contains(u, "JSON"):
		t.Kind = KindJSON
	case strings.Contains(u, "CHAR"), strings.Contains(u, "CLOB"), strings.Contains(u, "TEXT"):
		t.Kind = KindText
	case u == "":
		t.Kind = KindAny
	case strings.Contains(u, "BLOB"):
		t.Kind = KindBytes
	case strings.Contains(u, "REAL"), strings.Contains(u, "FLOA"), strings.Contains(u, "DOUB"):
		t.Kind = KindFloat
	default:
		t.Kind = KindNumeric
	}
	return t
}

// PostgresType maps a PostgreSQL base type name (pg_type.typname, domains
// resolved) to an input type; elem is the element's typname for arrays.
func PostgresType(typname, elem string) Type {
	t := Type{Name: typname}
	switch typname {
	case "int2":
		t.Kind, t.Bits = KindInt, 16
	case "int4":
		t.Kind, t.Bits = KindInt, 32
	case "int8":
		t.Kind, t.Bits = KindInt, 64
	case "float4", "float8":
		t.Kind = KindFloat
	case "numeric":
		t.Kind = KindNumeric
	case "bool":
		t.Kind = KindBool
	case "date":
		t.Kind = KindDate
	case "timestamptz":
		t.Kind = KindTimestamptz
	case "timestamp":
		t.Kind = KindTimestamp
	case "bytea":
		t.Kind = KindBytes
	case "uuid":
		t.Kind = KindUUID
	case "json", "jsonb":
		t.Kind = KindJSON
	case "interval":
		t.Kind = KindInterval
	case "text", "varchar", "bpchar", "name", "citext":
		t.Kind = KindText
	default:
		if elem != "" {
			e := PostgresType(elem, "")
			t.Kind, t.Elem, t.Name = KindArray, &e, elem+"[]"
		}
	}
	return t
}
