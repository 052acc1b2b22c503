package mcp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
)

// TestToolsListSize keeps tools/list small: every built-in tool's
// declaration as a client receives it, under 8 KiB.
func TestToolsListSize(t *testing.T) {
	specs, err := loadTools(lakegate.DefaultTools, "")
	if err != nil {
		t.Fatal(err)
	}
	res := &mcpsdk.ListToolsResult{}
	for _, s := range specs {
		res.Tools = append(res.Tools, s.tool())
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tools/list: %d tools, %d bytes", len(res.Tools), len(b))
	if len(b) > 8192 {
		t.Errorf("tools/list is %d bytes, want at most 8192", len(b))
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
	specs, err := loadTools(lakegate.DefaultTools, write(t, good))
	if err != nil {
		t.Fatal(err)
	}
	tool := specs[0].tool()
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
			_, err := loadTools(lakegate.DefaultTools, write(t, tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestListsSayHowTheyChange: the tools and prompts lists are declared
// fixed (read once at start) and may be kept an hour, the same for all;
// the resources follow the catalog, are announced when they change, and
// may be kept as long as the catalog is checked, by their caller only.
func TestListsSayHowTheyChange(t *testing.T) {
	p, _ := newTestPlugin(t, Options{CatalogInterval: 20 * time.Second})
	srv := serveHTTP(t, p)
	caps := connectStreamable(t, srv.URL, "alice", "2025-11-25", nil).InitializeResult().Capabilities
	if caps.Tools == nil || caps.Tools.ListChanged || caps.Prompts == nil || caps.Prompts.ListChanged ||
		caps.Resources == nil || !caps.Resources.ListChanged {
		t.Errorf("got tools %+v prompts %+v resources %+v, want tools and prompts fixed, resources changing", caps.Tools, caps.Prompts, caps.Resources)
	}
	cs := connectStreamable(t, srv.URL, "alice", "2026-07-28", nil)
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tools.TTLMs != int(time.Hour.Milliseconds()) || tools.CacheScope != "public" {
		t.Errorf("tools/list: got ttlMs %d scope %q, want an hour, public", tools.TTLMs, tools.CacheScope)
	}
	res, err := cs.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.TTLMs != 20000 || res.CacheScope != "private" {
		t.Errorf("resources/list: got ttlMs %d scope %q, want the catalog's interval, private", res.TTLMs, res.CacheScope)
	}
}
