package mcp

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/mcptest"
)

// writeTools writes tools.json into dir as an editor does (aside, then
// renamed in).
func writeTools(t *testing.T, dir string, data []byte) {
	t.Helper()
	tmp := filepath.Join(dir, "tools.json.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ToolsFile)); err != nil {
		t.Fatal(err)
	}
}

func toolNamesOf(t *testing.T, cs *mcpsdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tool := range res.Tools {
		out = append(out, tool.Name)
	}
	slices.Sort(out)
	return out
}

// TestToolGroups: a group declared in tools.json is a server of its own at
// /mcp/{group} (Streamable HTTP), /mcp/{group}/sse and over stdio, with
// only its tools, prompts and resources; /mcp keeps every tool; an unknown
// group is not_found naming the groups. A reload (here the admin's, at
// once) changes a group's tools, telling its sessions, and a group no
// longer declared closes its sessions; a reload that changes nothing
// tells nobody.
func TestToolGroups(t *testing.T) {
	dir := t.TempDir()
	sensors := map[string]any{"name": "sensors", "instructions": "Sensor data only.", "tools": []string{"list_tables", "describe_table"},
		"prompts": []string{}, "resources": false}
	analyst := map[string]any{"name": "analyst", "tools": []string{"list_databases", "run_sql"}}
	writeTools(t, dir, mcptest.GroupsFile(t, sensors, analyst))
	p, err := New(newFakeEngine(t), &Options{Tools: lakegate.DefaultTools, ConfigDir: dir, ToolsInterval: time.Hour,
		Enabled: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	srv := serveHTTP(t, p)

	changed := map[string]chan struct{}{"main": make(chan struct{}, 16), "sensors": make(chan struct{}, 16)}
	notify := func(name string) *mcpsdk.ClientOptions {
		return &mcpsdk.ClientOptions{ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) { changed[name] <- struct{}{} }}
	}
	connect := func(endpoint string, copts *mcpsdk.ClientOptions, sse bool) *mcpsdk.ClientSession {
		t.Helper()
		var tr mcpsdk.Transport = &mcpsdk.StreamableClientTransport{Endpoint: srv.URL + endpoint, HTTPClient: clientFor("alice"), MaxRetries: -1}
		if sse {
			tr = &mcpsdk.SSEClientTransport{Endpoint: srv.URL + endpoint, HTTPClient: clientFor("alice")}
		}
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, copts).Connect(t.Context(), tr, nil)
		if err != nil {
			t.Fatalf("connect %s: %v", endpoint, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	all := connect("/mcp", notify("main"), false)
	sens := connect("/mcp/sensors", notify("sensors"), false)
	ana := connect("/mcp/analyst/sse", nil, true)

	if got := toolNamesOf(t, all); len(got) != 11 {
		t.Errorf("/mcp: got tools %v, want every declared tool", got)
	}
	if got := toolNamesOf(t, sens); !slices.Equal(got, []string{"describe_table", "list_tables"}) {
		t.Errorf("/mcp/sensors: got tools %v", got)
	}
	if got := toolNamesOf(t, ana); !slices.Equal(got, []string{"list_databases", "run_sql"}) {
		t.Errorf("/mcp/analyst/sse: got tools %v", got)
	}
	if got := sens.InitializeResult().Instructions; got != "Sensor data only." {
		t.Errorf("/mcp/sensors: got instructions %q", got)
	}
	if res, err := sens.ListPrompts(t.Context(), nil); err != nil || len(res.Prompts) != 0 {
		t.Errorf("/mcp/sensors: got prompts %v %v, want none", res, err)
	}
	if res, err := ana.ListPrompts(t.Context(), nil); err != nil || len(res.Prompts) != len(promptNames) {
		t.Errorf("/mcp/analyst: got prompts %v %v, want every prompt", res, err)
	}
	if res, err := sens.ListResources(t.Context(), nil); err != nil || len(res.Resources) != 0 {
		t.Errorf("/mcp/sensors: got resources %v %v, want none", res, err)
	}
	if res, err := ana.ListResources(t.Context(), nil); err != nil || len(res.Resources) < 2 {
		t.Errorf("/mcp/analyst: got resources %v %v, want the catalog's", res, err)
	}
	if res, err := sens.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_tables", Arguments: map[string]any{"database": "iot"}}); err != nil || res.IsError {
		t.Errorf("a group's tool: got %v %v", res, err)
	}
	if _, err := sens.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": "SELECT 1"}}); err == nil ||
		!strings.Contains(err.Error(), `unknown tool "run_sql"`) || !strings.Contains(err.Error(), "available tools: describe_table, list_tables") {
		t.Errorf("another group's tool: got %v, want unknown, listing the group's", err)
	}

	resp, err := clientFor("alice").Post(srv.URL+"/mcp/nope", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `no tool group \"nope\"`) || !strings.Contains(string(body), "groups: sensors, analyst") {
		t.Errorf("an unknown group: got %d %s", resp.StatusCode, body)
	}

	// Over stdio, the group's tools.
	ct, st := mcpsdk.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() {
		done <- p.ServeStdio(t.Context(), st, lakegate.Caller{Subject: "desk", Roles: []string{"reader"}}, "sensors")
	}()
	stdio, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNamesOf(t, stdio); !slices.Equal(got, []string{"describe_table", "list_tables"}) {
		t.Errorf("stdio --group sensors: got tools %v", got)
	}
	stdio.Close()
	if err := <-done; err != nil {
		t.Errorf("stdio session: %v", err)
	}
	if err := p.ServeStdio(t.Context(), st, lakegate.Caller{Subject: "desk"}, "nope"); err == nil || !strings.Contains(err.Error(), `no tool group "nope"`) {
		t.Errorf("stdio --group nope: got %v", err)
	}

	// A bad group is refused with its line; what is served stays.
	writeTools(t, dir, mcptest.GroupsFile(t, sensors, map[string]any{"name": "bad", "tools": []string{"drop_table"}}))
	if _, err := p.ReloadTools(); err == nil || !strings.Contains(err.Error(), `tool "drop_table" is not declared`) || !strings.Contains(err.Error(), "line ") {
		t.Errorf("a group naming an undeclared tool: got %v", err)
	}
	if got := toolNamesOf(t, ana); len(got) != 2 {
		t.Errorf("after a refused reload: got %v on /mcp/analyst", got)
	}

	// The sensors group gains run_sql; analyst goes.
	sensors["tools"] = []string{"list_tables", "describe_table", "run_sql"}
	writeTools(t, dir, mcptest.GroupsFile(t, sensors))
	info, err := p.ReloadTools()
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Groups) != 1 || info.Groups[0].Name != "sensors" || len(info.Groups[0].Tools) != 3 || len(info.Tools) != 11 {
		t.Errorf("reload: got %+v", info)
	}
	select {
	case <-changed["sensors"]:
	case <-time.After(10 * time.Second):
		t.Fatal("the group's session was not told its tools changed")
	}
	if got := toolNamesOf(t, sens); !slices.Equal(got, []string{"describe_table", "list_tables", "run_sql"}) {
		t.Errorf("/mcp/sensors after the reload: got %v", got)
	}
	if _, err := ana.ListTools(t.Context(), nil); err == nil {
		t.Error("a removed group's session still answers")
	}
	resp, err = clientFor("alice").Get(srv.URL + "/mcp/analyst/sse")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a removed group: got %d, want 404", resp.StatusCode)
	}

	// Nothing changed for /mcp's tools: its session heard nothing, and a
	// reload of the same file tells no one.
	if _, err := p.ReloadTools(); err != nil {
		t.Fatal(err)
	}
	// A change notification leaves 10 ms after the change (the SDK's
	// debounce): none within 20 times that is none at all.
	select {
	case <-changed["main"]:
		t.Error("/mcp's session was told its tools changed, though they did not")
	case <-changed["sensors"]:
		t.Error("a reload of the same file told a group's session its tools changed")
	case <-time.After(200 * time.Millisecond):
	}
}
