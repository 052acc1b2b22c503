package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestRESTBesideMCP(t *testing.T) {
	e := start(t, envOptions{})
	reader := token(t, "alice", "reader")
	writer := token(t, "ingest", "writer")
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
