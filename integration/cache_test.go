package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

// The result cache through the real server: a repeated run_sql is
// answered from it (and says so), fresh: true and a tool declared
// "cache": false read now, and a REST ingest empties it.
func TestResultCacheTools(t *testing.T) {
	var doc struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(lakegate.DefaultTools, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Tools = append(doc.Tools, json.RawMessage(`{"name": "device_count", "handler": "sql", "database": "iot", "cache": false,
		"description": "Readings of one device", "statement": "SELECT count(*) AS n FROM readings WHERE device_id = $1",
		"parameters": [{"name": "device_id", "type": "integer", "required": true}]}`))
	dir := t.TempDir()
	raw, _ := json.Marshal(doc)
	if err := os.WriteFile(filepath.Join(dir, "tools.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	forgetIngested(t)
	e := start(t, envOptions{config: func(c *config.Config) {
		c.ResultCacheTTL = config.Duration(time.Minute)
		c.MCPConfigDir = dir
	}})
	cs := connectStreamableAt(t, e.base, token("agent", "reader"), "2025-11-25")
	type cached struct {
		Cache *struct {
			Hit   bool  `json:"hit"`
			AgeMS int64 `json:"age_ms"`
		} `json:"cache"`
	}
	hit := func(tool string, args map[string]any) (bool, string) {
		t.Helper()
		var out cached
		res := callJSON(t, cs, tool, args, &out)
		if res.IsError || out.Cache == nil {
			t.Fatalf("%s: %v, no cache info", tool, res.Content)
		}
		return out.Cache.Hit, res.Content[0].(*mcpsdk.TextContent).Text
	}
	count := map[string]any{"database": "iot", "sql": "SELECT count(*) AS n FROM readings WHERE device_id = 7"}
	h, before := hit("run_sql", count)
	if h {
		t.Fatal("the first call was a hit")
	}
	h, text := hit("run_sql", count)
	if !h || !strings.HasPrefix(text, before) || !strings.Contains(text, "from the result cache") {
		t.Fatalf("the second call: hit %v, text %q", h, text)
	}
	fresh := map[string]any{"database": "iot", "sql": count["sql"], "fresh": true}
	if h, _ := hit("run_sql", fresh); h {
		t.Error("fresh: true was a hit")
	}
	for range 2 {
		if h, _ := hit("device_count", map[string]any{"device_id": 7}); h {
			t.Error("a tool declared cache: false was a hit")
		}
	}
	// Paging: the page after the second comes from what the second
	// read ahead, the same rows a fresh read gives.
	type paged struct {
		cached
		NextCursor string `json:"next_cursor"`
	}
	ids := "SELECT id FROM readings WHERE device_id = 7 ORDER BY id"
	var shown []string
	cursor := ""
	for i, want := range []bool{false, false, true, true} {
		args := map[string]any{"database": "iot", "sql": ids, "max_rows": 5}
		if cursor != "" {
			args["cursor"] = cursor
		}
		var out paged
		res := callJSON(t, cs, "run_sql", args, &out)
		if res.IsError || out.Cache == nil || out.Cache.Hit != want || out.NextCursor == "" {
			t.Fatalf("page %d: %v, cache %+v, want hit %v and a next cursor", i+1, res.Content, out.Cache, want)
		}
		text := res.Content[0].(*mcpsdk.TextContent).Text
		shown = append(shown, strings.Split(strings.TrimSpace(text[:strings.Index(text, "# rows")]), "\n")[1:]...)
		cursor = out.NextCursor
	}
	var none struct{}
	whole := callJSON(t, cs, "run_sql", map[string]any{"database": "iot", "sql": ids, "max_rows": 20, "fresh": true}, &none)
	first := strings.Split(strings.TrimSpace(whole.Content[0].(*mcpsdk.TextContent).Text), "\n")[1:21]
	if strings.Join(shown, ",") != strings.Join(first, ",") {
		t.Errorf("four pages of 5 showed %v, want %v", shown, first)
	}

	body := `[{"id": 200001, "device_id": 7, "ts": "2026-01-01T00:00:00Z", "temperature": 20, "humidity": 40, "status": "ok"}]`
	if code, out := post(t, e.base+"/data/iot/readings", token("ingest", "writer"), body); code != http.StatusOK {
		t.Fatalf("ingest: %d %s", code, out)
	}
	if h, after := hit("run_sql", count); h || after == before {
		t.Errorf("after an ingest: hit %v, %q (before %q)", h, after, before)
	}
}
