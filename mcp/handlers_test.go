package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
)

// TestListsSayHowTheyChange: without an operator's tools.json the tools
// and prompts lists are declared fixed (read once at start) and may be
// kept an hour (the tools by their caller: roles filter them);
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
	if tools.TTLMs != int(time.Hour.Milliseconds()) || tools.CacheScope != "private" {
		t.Errorf("tools/list: got ttlMs %d scope %q, want an hour, private (roles filter it)", tools.TTLMs, tools.CacheScope)
	}
	res, err := cs.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.TTLMs != 20000 || res.CacheScope != "private" {
		t.Errorf("resources/list: got ttlMs %d scope %q, want the catalog's interval, private", res.TTLMs, res.CacheScope)
	}
}

// TestToolRoles: a tool declared with roles is listed to, and callable
// by, those roles only; to anyone else it does not exist: not listed, and
// a call of it is an unknown tool whose answer lists only theirs.
func TestToolRoles(t *testing.T) {
	var doc struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(lakegate.DefaultTools, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Tools = append(doc.Tools, map[string]any{"name": "admin_databases", "description": "The databases, for admins",
		"handler": "list_databases", "input_schema": map[string]any{"type": "object"}, "roles": []string{"admin"}})
	tools, _ := json.Marshal(doc)
	eng := newFakeEngine(t)
	p, err := New(eng, &Options{Tools: tools, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	srv := serveHTTP(t, p)
	listed := func(sub string) []string {
		res, err := connectStreamable(t, srv.URL, sub, "2025-11-25", nil).ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	if got := listed("alice"); slices.Contains(got, "admin_databases") || len(got) != len(doc.Tools)-1 {
		t.Errorf("a reader sees %v, want every tool but admin_databases", got)
	}
	if got := listed("admin-ops"); !slices.Contains(got, "admin_databases") {
		t.Errorf("an admin sees %v, want admin_databases too", got)
	}
	_, err = connectStreamable(t, srv.URL, "alice", "2025-11-25", nil).CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "admin_databases"})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "admin_databases"`) || strings.Contains(strings.SplitN(err.Error(), "available tools", 2)[1], "admin_databases") {
		t.Errorf("a reader's call: got %v, want an unknown tool that lists theirs only", err)
	}
	res, err := connectStreamable(t, srv.URL, "admin-ops", "2025-11-25", nil).CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "admin_databases"})
	if err != nil || res.IsError {
		t.Errorf("an admin's call: got %v %v, want the databases", res, err)
	}
	doc.Tools[len(doc.Tools)-1]["roles"] = []string{"root"}
	tools, _ = json.Marshal(doc)
	if _, err := New(eng, &Options{Tools: tools}); err == nil || !strings.Contains(err.Error(), `role "root"`) {
		t.Errorf("an unknown role: got %v, want refused", err)
	}
}

// TestToolsReload: an edit of the operator's tools.json reaches connected
// sessions without a restart: they are told the list changed, see the new
// tools, and a removed tool is unknown; a file that does not parse is
// refused at ERROR and the tools in use stay.
func TestToolsReload(t *testing.T) {
	var doc struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(lakegate.DefaultTools, &doc); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(data []byte) {
		t.Helper()
		// Written aside and renamed in, as an editor or a config manager
		// does: the watch never reads half a file.
		tmp := filepath.Join(dir, "tools.json.tmp")
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, ToolsFile)); err != nil {
			t.Fatal(err)
		}
	}
	marshal := func(tools []map[string]any) []byte {
		b, _ := json.Marshal(map[string]any{"tools": tools})
		return b
	}
	write(marshal(doc.Tools))
	var logs testutil.Buffer
	p, err := New(newFakeEngine(t), &Options{Tools: lakegate.DefaultTools, ConfigDir: dir, ToolsInterval: 20 * time.Millisecond,
		Enabled: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	changed := make(chan struct{}, 16)
	cs := connectStreamable(t, serveHTTP(t, p).URL, "alice", "2025-11-25", &mcpsdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) { changed <- struct{}{} }})
	if caps := cs.InitializeResult().Capabilities; caps.Tools == nil || !caps.Tools.ListChanged {
		t.Errorf("got tools capabilities %+v, want listChanged with a watched tools.json", caps.Tools)
	}
	names := func() []string {
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range res.Tools {
			out = append(out, tool.Name)
		}
		return out
	}

	// Drop explain, add a second name for list_databases.
	edited := slices.DeleteFunc(slices.Clone(doc.Tools), func(m map[string]any) bool { return m["name"] == "explain" })
	edited = append(edited, map[string]any{"name": "databases", "description": "The databases", "handler": "list_databases",
		"input_schema": map[string]any{"type": "object"}})
	write(marshal(edited))
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the edit")
	}
	testutil.Eventually(t, 5*time.Second, "the edited tools listed", func() bool {
		got := names()
		return slices.Contains(got, "databases") && !slices.Contains(got, "explain")
	})
	if _, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "explain", Arguments: map[string]any{"database": "iot", "sql": "SELECT 1"}}); err == nil ||
		!strings.Contains(err.Error(), `unknown tool "explain"`) {
		t.Errorf("a removed tool: got %v, want unknown", err)
	}
	if res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "databases"}); err != nil || res.IsError {
		t.Errorf("an added tool: got %v %v", res, err)
	}

	write([]byte(`{"tools": [`))
	testutil.Eventually(t, 5*time.Second, "the refused reload logged", func() bool { return strings.Contains(logs.String(), "tools.json not reloaded") })
	if got := names(); !slices.Contains(got, "databases") || len(got) != len(edited) {
		t.Errorf("after a bad file: got %v, want the tools in use kept", got)
	}
}
