package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolsListSize keeps tools/list small: every built-in tool's
// declaration as a client receives it, at most 10.5 KiB (11 tools; a
// tool group offers fewer).
func TestToolsListSize(t *testing.T) {
	d, err := Load(lakegate.DefaultTools, "", testPrompts)
	if err != nil {
		t.Fatal(err)
	}
	specs := d.Tools
	res := &mcpsdk.ListToolsResult{}
	for _, s := range specs {
		res.Tools = append(res.Tools, s.Tool())
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tools/list: %d tools, %d bytes", len(res.Tools), len(b))
	if len(b) > 10752 {
		t.Errorf("tools/list is %d bytes, want at most 10752", len(b))
	}
}

func TestCustomSQLToolLoad(t *testing.T) {
	write := func(t *testing.T, file string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ToolsFile), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	good := `{"tools": [{"name": "device_readings", "description": "Readings of one device since a time", "handler": "sql", "database": "iot",
		"statement": "SELECT id, ts FROM readings WHERE device_id = $1 AND ts >= $2 ORDER BY ts",
		"parameters": [{"name": "device_id", "type": "integer", "description": "Device id", "required": true}, {"name": "since", "type": "timestamp"}]}]}`
	d, err := Load(lakegate.DefaultTools, write(t, good), testPrompts)
	if err != nil {
		t.Fatal(err)
	}
	specs := d.Tools
	tool := specs[0].Tool()
	schema, _ := json.Marshal(tool.InputSchema)
	if !strings.Contains(string(schema), `"device_id":{"type":"integer","description":"Device id"}`) ||
		!strings.Contains(string(schema), `"required":["device_id"]`) || tool.OutputSchema == nil ||
		tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
		t.Errorf("got %s %+v", schema, tool)
	}
	for _, tc := range []struct{ name, file, want string }{
		{"refused statement", `{"tools": [{"name": "bad", "description": "d", "handler": "sql", "database": "iot", "statement": "SELECT 1; DROP TABLE readings"}]}`,
			"tools[0] (bad): statement refused: only one statement"},
		{"placeholder count", `{"tools": [{"name": "bad", "description": "d", "handler": "sql", "database": "iot", "statement": "SELECT $1, $2", "parameters": [{"name": "a", "type": "string"}]}]}`,
			"2 placeholders but 1 parameters"},
		{"bad type", `{"tools": [{"name": "bad", "description": "d", "handler": "sql", "database": "iot", "statement": "SELECT $1", "parameters": [{"name": "a", "type": "blob"}]}]}`,
			`unknown type "blob"`},
		{"no database", `{"tools": [{"name": "bad", "description": "d", "handler": "sql", "statement": "SELECT 1"}]}`, "database is required"},
		{"own schema", `{"tools": [{"name": "bad", "description": "d", "handler": "sql", "database": "iot", "statement": "SELECT 1", "input_schema": {"type": "object"}}]}`,
			"input_schema is generated"},
		{"statement on another handler", `{"tools": [{"name": "bad", "description": "d", "handler": "run_sql", "statement": "SELECT 1", "input_schema": {"type": "object"}}]}`,
			`only for handler "sql"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(lakegate.DefaultTools, write(t, tc.file), testPrompts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
