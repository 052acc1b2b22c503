package mcp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

func TestBuiltinToolsLoad(t *testing.T) {
	d, err := loadTools(lakegate.DefaultTools, "")
	if err != nil {
		t.Fatal(err)
	}
	specs := d.tools
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
		if s.Annotations == nil || !s.Annotations.ReadOnlyHint {
			t.Errorf("%s: want readOnlyHint", s.Name)
		}
		if len(s.OutputSchema) == 0 {
			t.Errorf("%s: want an output schema", s.Name)
		}
	}
	if got := strings.Join(names, ","); got != "list_databases,list_tables,describe_table,query,query_time_series,explain,run_sql,get_result_block" {
		t.Errorf("got %s", got)
	}
}

func TestToolsFileErrors(t *testing.T) {
	obj := `{"type":"object"}`
	for _, tc := range []struct{ name, file, want string }{
		{"syntax", "{\"tools\": [\n{\"name\": \"a\",\n\"description\": }\n]}", "line 3"},
		{"unknown key", `{"tools": [], "extra": 1}`, `unknown field "extra"`},
		{"no tools", `{"tools": []}`, "no tools declared"},
		{"bad name", "{\"tools\": [\n {\"name\": \"a b\", \"description\": \"d\", \"handler\": \"run_sql\", \"input_schema\": " + obj + "}]}", "line 2: tools[0] (a b): name must be"},
		{"unknown handler", "{\"tools\": [\n {\"name\": \"x\", \"description\": \"d\", \"handler\": \"rm_rf\", \"input_schema\": " + obj + "}]}", `unknown handler "rm_rf"; known handlers: [describe_table explain get_result_block list_databases list_tables query query_time_series run_sql sql]`},
		{"missing description", `{"tools": [{"name": "x", "handler": "run_sql", "input_schema": ` + obj + `}]}`, "description is required"},
		{"schema not object", "{\"tools\": [\n{\"name\": \"x\", \"description\": \"d\", \"handler\": \"run_sql\", \"input_schema\": " + obj + "},\n\n{\"name\": \"y\", \"description\": \"d\", \"handler\": \"run_sql\", \"input_schema\": {\"type\": \"string\"}}]}", `line 4: tools[1] (y): input_schema: "type" must be "object"`},
		{"missing schema", `{"tools": [{"name": "x", "description": "d", "handler": "run_sql"}]}`, "input_schema: is required"},
		{"twice", `{"tools": [{"name": "x", "description": "d", "handler": "run_sql", "input_schema": ` + obj + `}, {"name": "x", "description": "d", "handler": "query", "input_schema": ` + obj + `}]}`, "declared twice"},
		{"bad timeout", `{"tools": [{"name": "x", "description": "d", "handler": "run_sql", "timeout": "forever", "input_schema": ` + obj + `}]}`, `timeout "forever": want a duration from 100ms to 10m`},
		{"timeout too long", `{"tools": [{"name": "x", "description": "d", "handler": "run_sql", "timeout": "1h", "input_schema": ` + obj + `}]}`, "want a duration from 100ms to 10m"},
		{"wrong type", `{"tools": [{"name": 5}]}`, `field "tools.name": got a JSON number, want string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ToolsFile), []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := loadTools(lakegate.DefaultTools, dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), filepath.Join(dir, ToolsFile)) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestConfigDirReplacesTools(t *testing.T) {
	dir := t.TempDir()
	file := `{"tools": [{"name": "sql", "description": "one select", "handler": "run_sql", "input_schema": {"type": "object"}}]}`
	if err := os.WriteFile(filepath.Join(dir, ToolsFile), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := New(nil, &Options{Tools: lakegate.DefaultTools, ConfigDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(context.Background()) }()
	if got := p.tools.names(); len(got) != 1 || got[0] != "sql" {
		t.Errorf("got %v, want [sql]", got)
	}
	// A config dir without tools.json keeps the built-in tools.
	p2, err := New(nil, &Options{Tools: lakegate.DefaultTools, ConfigDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p2.Close(context.Background()) }()
	if len(p2.tools.names()) != 8 {
		t.Errorf("got %v; want the 8 built-in tools", p2.tools.names())
	}
}
