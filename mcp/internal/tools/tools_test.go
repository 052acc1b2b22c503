package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

func TestBuiltinToolsLoad(t *testing.T) {
	d, err := Load(lakegate.DefaultTools, "", testPrompts)
	if err != nil {
		t.Fatal(err)
	}
	specs := d.Tools
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
		// Every tool reads; cancel_job changes nothing but the caller's
		// own job.
		if readOnly := s.Name != "cancel_job"; s.Annotations == nil || s.Annotations.ReadOnlyHint != readOnly || s.Annotations.DestructiveHint == nil || *s.Annotations.DestructiveHint {
			t.Errorf("%s: want readOnlyHint %v, not destructive", s.Name, readOnly)
		}
		if len(s.OutputSchema) == 0 {
			t.Errorf("%s: want an output schema", s.Name)
		}
	}
	if got := strings.Join(names, ","); got != "list_databases,list_tables,describe_table,query,query_time_series,tail,explain,run_sql,get_result_block,job_status,cancel_job" {
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
		{"unknown handler", "{\"tools\": [\n {\"name\": \"x\", \"description\": \"d\", \"handler\": \"rm_rf\", \"input_schema\": " + obj + "}]}", `unknown handler "rm_rf"; known handlers: [cancel_job describe_table explain get_result_block job_status list_databases list_tables query query_time_series run_sql sql tail]`},
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
			_, err := Load(lakegate.DefaultTools, dir, testPrompts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), filepath.Join(dir, ToolsFile)) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

// testPrompts stand for the plugin's built-in prompts, which a group may
// name (the plugin passes its own to Load).
var testPrompts = []string{"tool-descriptions", "explore_database", "analyze_table"}
