package mcp

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/lakegate/lakegate"
)

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
	if got := p.tools.Names(); len(got) != 1 || got[0] != "sql" {
		t.Errorf("got %v, want [sql]", got)
	}
	// A config dir without tools.json keeps the built-in tools.
	p2, err := New(nil, &Options{Tools: lakegate.DefaultTools, ConfigDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p2.Close(context.Background()) }()
	if len(p2.tools.Names()) != 11 {
		t.Errorf("got %v; want the 11 built-in tools", p2.tools.Names())
	}
}
