package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

// builtinArgs is the argument schema of the built-in tool name.
func builtinArgs(t *testing.T, name string) *argsSchema {
	t.Helper()
	d, err := Load(lakegate.DefaultTools, "", testPrompts)
	if err != nil {
		t.Fatal(err)
	}
	specs := d.Tools
	for _, s := range specs {
		if s.Name == name {
			return s.args
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

func TestArgsRefusals(t *testing.T) {
	for _, tc := range []struct{ tool, args, want string }{
		{"run_sql", `{"database": "d", "sql": "s", "limit": 5}`, `argument "limit" is now "max_rows"`},
		{"run_sql", `{"database": "d", "sql": "s", "bogus": 1}`, `unknown argument "bogus"`},
		{"run_sql", `{"database": "d"}`, `argument "sql" is required`},
		{"run_sql", `{"database": "d", "sql": null}`, `argument "sql" is required`},
		{"run_sql", `{"database": 5, "sql": "s"}`, `argument "database": type: 5 has type "integer", want "string"`},
		{"run_sql", `{"database": "d", "sql": "s", "max_rows": -1}`, `argument "max_rows": minimum`},
		{"run_sql", `{"database": "d", "sql": "s", "format": "xml"}`, `argument "format": enum`},
		{"run_sql", `[1]`, `arguments must be a JSON object`},
		{"query_time_series", `{"database": "d", "table": "t", "time_column": "c", "start": "a", "end": "b", "bucket": {"count": 2}}`,
			`argument "bucket": required: missing properties: ["unit"]`},
		// The old name stays a plain unknown argument where the tool has no max_rows.
		{"explain", `{"database": "d", "sql": "s", "limit": 5}`, `unknown argument "limit"`},
		{"list_databases", `{"x": 1}`, `unknown argument "x"`},
	} {
		var in map[string]any
		err := builtinArgs(t, tc.tool).decode(json.RawMessage(tc.args), &in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: got %v, want %q", tc.tool, tc.args, err, tc.want)
			continue
		}
		if lakegate.KindOf(err) != lakegate.KindValidation {
			t.Errorf("%s %s: kind %s, want validation", tc.tool, tc.args, lakegate.KindOf(err))
		}
	}
	// An integer the schema takes that the handler's type cannot hold.
	err := builtinArgs(t, "run_sql").decode(json.RawMessage(`{"database": "d", "sql": "s", "max_rows": 12345678901234567890}`), &sqlIn{})
	if want := `argument "max_rows": got a JSON number that does not fit int`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("max_rows past int: got %v, want %q", err, want)
	}
	err = builtinArgs(t, "run_sql").decode(json.RawMessage(`{"database": "d"}`), &sqlIn{})
	if body := lakegate.NewErrorBody(err); body.Hint != "accepted arguments: cursor, database, deliver, export, format, fresh, max_chars, max_rows, params, sql" {
		t.Errorf("hint: got %q", body.Hint)
	}
}

func TestArgsDecode(t *testing.T) {
	var in sqlIn
	raw := `{"database": "d", "sql": "SELECT $1", "params": [12345678901234567890, "x"], "max_rows": 0, "export": true}`
	if err := builtinArgs(t, "run_sql").decode(json.RawMessage(raw), &in); err != nil {
		t.Fatal(err)
	}
	if in.Database != "d" || in.SQL != "SELECT $1" || in.MaxRows == nil || *in.MaxRows != 0 || !in.Export {
		t.Errorf("got %+v", in)
	}
	// Numbers reach the database as written, not as float64.
	if n, ok := in.Params[0].(json.Number); !ok || n.String() != "12345678901234567890" {
		t.Errorf("params[0]: got %#v", in.Params[0])
	}
	var none noArgs
	for _, raw := range []string{``, `null`, `{}`} {
		if err := builtinArgs(t, "list_databases").decode(json.RawMessage(raw), &none); err != nil {
			t.Errorf("%q: %v", raw, err)
		}
	}
}

// A schema that declares an argument the handler's input type lacks is a
// start-up error, so tools/list never offers what the server ignores.
func TestArgsSchemaMatchesHandler(t *testing.T) {
	file := `{"tools": [{"name": "x", "description": "d", "handler": "run_sql",
		"input_schema": {"type": "object", "properties": {"database": {"type": "string"}, "dry_run": {"type": "boolean"}}}}]}`
	_, err := parseTools([]byte(file), testPrompts)
	if err == nil || !strings.Contains(err.Error(), `argument "dry_run" is not one the handler takes`) {
		t.Errorf("got %v", err)
	}
	// An operator's open schema (no additionalProperties) lets unknown
	// arguments through to be ignored, as it says.
	file = `{"tools": [{"name": "x", "description": "d", "handler": "list_tables",
		"input_schema": {"type": "object", "properties": {"database": {"type": "string"}}}}]}`
	d, err := parseTools([]byte(file), testPrompts)
	if err != nil {
		t.Fatal(err)
	}
	specs := d.Tools
	var in tablesIn
	if err := specs[0].args.decode(json.RawMessage(`{"database": "d", "extra": 1}`), &in); err != nil || in.Database != "d" {
		t.Errorf("open schema: got %+v %v", in, err)
	}
}
