package integration

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestRESTBesideMCP(t *testing.T) {
	e := start(t, envOptions{})
	reader := token("alice", "reader")
	writer := token("ingest", "writer")
	cs := e.connect(t, reader) // an open MCP session must not disturb REST
	ctx := t.Context()

	t.Run("databases", func(t *testing.T) {
		code, body := get(t, e.base+"/rest/databases", reader)
		if code != 200 || !strings.Contains(body, `"name":"iot"`) {
			t.Errorf("got %d %s, want iot listed", code, body)
		}
	})
	t.Run("tables", func(t *testing.T) {
		code, body := get(t, e.base+"/rest/databases/iot/tables", reader)
		if code != 200 || !strings.Contains(body, `"readings"`) || !strings.Contains(body, `"devices"`) {
			t.Errorf("got %d %s", code, body)
		}
	})
	t.Run("describe", func(t *testing.T) {
		code, body := get(t, e.base+"/rest/databases/iot/tables/devices", reader)
		if code != 200 || !strings.Contains(body, `"installed"`) || !strings.Contains(body, `"primary_key":["id"]`) {
			t.Errorf("got %d %s", code, body)
		}
		if code, _ := get(t, e.base+"/rest/databases/iot/tables/nope", reader); code != 404 {
			t.Errorf("unknown table: got %d, want 404", code)
		}
	})
	t.Run("sql", func(t *testing.T) {
		code, body := post(t, e.base+"/rest/sql", reader,
			`{"database":"iot","sql":"SELECT id, name FROM devices WHERE site = $1 ORDER BY id","params":["oslo"],"limit":3}`)
		var res result
		if err := json.Unmarshal([]byte(body), &res); err != nil || code != 200 {
			t.Fatalf("got %d %s", code, body)
		}
		var want int
		if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM devices WHERE site = 'oslo'").Scan(&want); err != nil {
			t.Fatal(err)
		}
		if res.RowCount != 3 || res.Truncated != (want > 3) || len(res.Columns) != 2 || res.Columns[1].Name != "name" {
			t.Errorf("got %+v, want 3 rows of %d, truncated", res, want)
		}
	})
	t.Run("sql errors", func(t *testing.T) {
		for _, tc := range []struct {
			name, body string
			want       int
		}{
			{"write", `{"database":"iot","sql":"UPDATE devices SET active = false"}`, 400},
			{"unknown field", `{"database":"iot","sql":"SELECT 1","sqll":"x"}`, 400},
			{"not json", `SELECT 1`, 400},
			{"missing sql", `{"database":"iot"}`, 400},
			{"unknown database", `{"database":"nope","sql":"SELECT 1"}`, 404},
			{"bad column", `{"database":"iot","sql":"SELECT nope FROM devices"}`, 400},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, body := post(t, e.base+"/rest/sql", reader, tc.body)
				if code != tc.want || !strings.Contains(body, `"message"`) {
					t.Errorf("got %d %s, want %d with a message", code, body, tc.want)
				}
			})
		}
	})
	t.Run("ingest", func(t *testing.T) {
		if _, err := e.pool.Exec(ctx, "DELETE FROM readings WHERE id > 100000"); err != nil {
			t.Fatal(err)
		}
		count := func() int {
			var n int
			if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM readings WHERE id > 100000").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		good := `[{"id":100001,"device_id":1,"ts":"2025-06-01T00:00:00Z","temperature":20.5,"humidity":40,"power_w":"12.25","status":"ok"},
			{"id":100002,"device_id":2,"ts":"2025-06-01T00:00:03.123456Z","temperature":21,"humidity":41,"power_w":null,"status":"warn","note":"x"}]`
		code, body := post(t, e.base+"/data/iot/readings", writer, good)
		if code != 200 || !strings.Contains(body, `"inserted":2`) || count() != 2 {
			t.Fatalf("got %d %s and %d rows, want 2 inserted", code, body, count())
		}
		ndjson := `{"id":100003,"device_id":3,"ts":"2025-06-01T00:00:06Z","temperature":1,"humidity":2,"status":"ok"}
{"id":100004,"device_id":3,"ts":"2025-06-01T00:00:09Z","temperature":1,"humidity":2,"status":"ok"}`
		if code, body := post(t, e.base+"/data/iot/readings", writer, ndjson); code != 200 || !strings.Contains(body, `"inserted":2`) {
			t.Fatalf("ndjson: got %d %s", code, body)
		}
		for _, tc := range []struct{ name, body, mention string }{
			{"unknown column", `[{"id":100010,"device_id":1,"ts":"2025-06-01T00:00:00Z","temperature":1,"humidity":1,"status":"ok"},{"id":100011,"devise_id":1}]`, "row 1"},
			{"bad type", `[{"id":100012,"device_id":"abc","ts":"2025-06-01T00:00:00Z","temperature":1,"humidity":1,"status":"ok"}]`, "device_id"},
			{"not an object", `[1]`, "row 0"},
			{"broken json", `[{"id":1}`, "row"},
			// encoding/json would store U+FFFD in place of text that is
			// not UTF-8; ingest refuses it, naming row and column.
			{"invalid UTF-8", `[{"id":100013,"device_id":1,"ts":"2025-06-01T00:00:00Z","temperature":1,"humidity":1,"status":"ok","note":"fine"},
				{"id":100014,"device_id":1,"ts":"2025-06-01T00:00:00Z","temperature":1,"humidity":1,"status":"ok","note":"caf` + "\xe9" + `"}]`, `row 1, column \"note\"`},
			{"lone surrogate escape", `{"id":100015,"device_id":1,"ts":"2025-06-01T00:00:00Z","temperature":1,"humidity":1,"status":"ok"}
{"id":100016,"device_id":1,"ts":"2025-06-01T00:00:00Z","temperature":1,"humidity":1,"status":"\ud800"}`, `row 1, column \"status\"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, body := post(t, e.base+"/data/iot/readings", writer, tc.body)
				if code != 400 || !strings.Contains(body, tc.mention) {
					t.Errorf("got %d %s, want 400 naming %q", code, body, tc.mention)
				}
				if n := count(); n != 4 {
					t.Errorf("rows after a refused ingest: got %d, want 4 (nothing inserted)", n)
				}
			})
		}
		if code, _ := post(t, e.base+"/data/iot/nope", writer, `[{"a":1}]`); code != http.StatusNotFound {
			t.Errorf("unknown table: got %d, want 404", code)
		}
		if _, err := e.pool.Exec(ctx, "DELETE FROM readings WHERE id > 100000"); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Errorf("MCP session after REST traffic: %v", err)
	}
}

// REST and MCP agree on row caps, and a truncated result says the same
// next step on both, with a cursor each can continue: the pages put
// together are the whole result.
func TestTruncatedNextStepRESTAndMCP(t *testing.T) {
	e := start(t, envOptions{})
	tok := token("alice", "reader")
	cs := e.connect(t, tok)
	const sqlText = "SELECT id FROM readings WHERE id <= 25 ORDER BY id"
	rest := func(limit int, cursor string) (ids []int64, next, hint string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"database": "iot", "sql": sqlText, "limit": limit, "cursor": cursor})
		req, _ := http.NewRequest("POST", e.base+"/rest/sql", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Rows       [][]int64 `json:"rows"`
			NextCursor string    `json:"next_cursor"`
			Hint       string    `json:"hint"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("REST limit %d: %d %v", limit, resp.StatusCode, err)
		}
		for _, r := range out.Rows {
			ids = append(ids, r[0])
		}
		return ids, out.NextCursor, out.Hint
	}
	mcpPage := func(maxRows int, cursor string) (ids []int64, next, hint string) {
		t.Helper()
		args := map[string]any{"database": "iot", "sql": sqlText, "max_rows": maxRows}
		if cursor != "" {
			args["cursor"] = cursor
		}
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("run_sql max_rows %d: %v %s", maxRows, err, textOf(res))
		}
		var meta struct {
			NextCursor string `json:"next_cursor"`
			Hint       string `json:"hint"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &meta)
		for _, line := range strings.Split(textOf(res), "\n")[1:] {
			if n, err := strconv.ParseInt(line, 10, 64); err == nil {
				ids = append(ids, n)
			}
		}
		return ids, meta.NextCursor, meta.Hint
	}
	// The same caps are accepted on both (20,000 is within max_row_limit).
	if ids, _, _ := rest(20000, ""); len(ids) != 25 {
		t.Errorf("REST limit 20000: got %d rows, want 25", len(ids))
	}
	if ids, _, _ := mcpPage(20000, ""); len(ids) != 25 {
		t.Errorf("MCP max_rows 20000: got %d rows, want 25", len(ids))
	}
	for name, page := range map[string]func(int, string) ([]int64, string, string){"rest": rest, "mcp": mcpPage} {
		var all []int64
		var hints []string
		for cursor := ""; ; {
			ids, next, hint := page(10, cursor)
			all = append(all, ids...)
			if next == "" {
				break
			}
			hints = append(hints, hint)
			cursor = next
		}
		if len(all) != 25 || all[0] != 1 || all[24] != 25 || len(hints) != 2 {
			t.Errorf("%s: pages gave %v with %d hints, want ids 1..25 in three pages", name, all, len(hints))
		}
		if len(hints) > 0 && !strings.Contains(hints[0], "next_cursor") {
			t.Errorf("%s: hint %q, want the next step", name, hints[0])
		}
	}
	_, _, restHint := rest(10, "")
	_, _, mcpHint := mcpPage(10, "")
	if restHint != mcpHint {
		t.Errorf("REST and MCP say different things:\n%s\n%s", restHint, mcpHint)
	}
}
