package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/query"
)

func TestCatalogRoutes(t *testing.T) {
	st := newStack(t, nil)
	tok := token("r", lakegate.RoleReader)
	t.Run("databases", func(t *testing.T) {
		r := st.do(t, "GET", "/rest/databases", tok, "")
		var got struct{ Databases []query.Database }
		r.decode(t, &got)
		want := []query.Database{{Name: "demo", Dialect: query.SQLite}}
		if r.code != http.StatusOK || len(got.Databases) != 1 || got.Databases[0] != want[0] {
			t.Errorf("got %d %+v, want 200 %+v", r.code, got.Databases, want)
		}
	})
	t.Run("tables", func(t *testing.T) {
		r := st.do(t, "GET", "/rest/databases/demo/tables", tok, "")
		var got struct {
			Database string
			Tables   []query.Table
		}
		r.decode(t, &got)
		names := map[string]bool{}
		for _, tb := range got.Tables {
			names[tb.Name] = true
			if len(tb.Columns) != 0 {
				t.Errorf("table %s: got %d columns, want none in a listing", tb.Name, len(tb.Columns))
			}
		}
		if r.code != http.StatusOK || got.Database != "demo" || !names["devices"] || !names["readings"] {
			t.Errorf("got %d %s, want 200 listing devices and readings", r.code, r.body)
		}
	})
	t.Run("describe", func(t *testing.T) {
		r := st.do(t, "GET", "/rest/databases/demo/tables/readings", tok, "")
		var got query.Table
		r.decode(t, &got)
		cols := map[string]bool{}
		for _, c := range got.Columns {
			cols[c.Name] = c.Nullable
		}
		if r.code != http.StatusOK || got.Name != "readings" || len(got.Columns) != 8 || !cols["note"] || cols["status"] {
			t.Errorf("got %d %s, want 200 with 8 columns, note nullable, status not", r.code, r.body)
		}
		if len(got.ForeignKeys) != 1 || got.ForeignKeys[0].RefTable != "devices" {
			t.Errorf("foreign keys: got %+v, want one to devices", got.ForeignKeys)
		}
	})
	errs := []struct {
		name, path string
		want       int
		msg        string
	}{
		{"unknown database", "/rest/databases/nope/tables", http.StatusNotFound, `"nope"`},
		{"unknown table", "/rest/databases/demo/tables/device", http.StatusNotFound, `"device"`},
		{"unknown database on describe", "/rest/databases/x/tables/devices", http.StatusNotFound, `"x"`},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			r := st.do(t, "GET", tt.path, tok, "")
			if r.code != tt.want {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tt.want)
			}
			if e := r.errBody(t); e.Error.Kind != lakegate.KindNotFound || !strings.Contains(e.Error.Message, tt.msg) {
				t.Errorf("got %+v, want not_found naming %s", e.Error, tt.msg)
			}
		})
	}
}

func TestSQL(t *testing.T) {
	st := newStack(t, nil)
	tok := token("r", lakegate.RoleReader)
	tests := []struct {
		name, body    string
		want          int
		kind          lakegate.Kind
		rows          int
		truncated     bool
		firstRowFirst string
	}{
		{name: "count", body: sqlJSON(t, "demo", "SELECT count(*) AS n FROM devices", 0), want: 200, rows: 1, firstRowFirst: "50"},
		{name: "params", body: `{"database":"demo","sql":"SELECT id FROM devices WHERE name = ?","params":["dev-0007"]}`, want: 200, rows: 1, firstRowFirst: "7"},
		{name: "default limit truncates", body: sqlJSON(t, "demo", "SELECT id FROM readings ORDER BY id", 0), want: 200, rows: 100, truncated: true, firstRowFirst: "1"},
		{name: "limit truncates", body: sqlJSON(t, "demo", "SELECT id FROM devices ORDER BY id", 10), want: 200, rows: 10, truncated: true, firstRowFirst: "1"},
		{name: "limit not reached", body: sqlJSON(t, "demo", "SELECT id FROM devices", 50), want: 200, rows: 50},
		{name: "limit over max", body: sqlJSON(t, "demo", "SELECT id FROM devices", 10_000_001), want: 400, kind: lakegate.KindValidation},
		{name: "negative limit", body: sqlJSON(t, "demo", "SELECT id FROM devices", -1), want: 400, kind: lakegate.KindValidation},
		{name: "delete refused", body: sqlJSON(t, "demo", "DELETE FROM devices", 0), want: 400, kind: lakegate.KindValidation},
		{name: "two statements", body: sqlJSON(t, "demo", "SELECT 1; SELECT 2", 0), want: 400, kind: lakegate.KindValidation},
		{name: "syntax error", body: sqlJSON(t, "demo", "SELEC id FROM devices", 0), want: 400, kind: lakegate.KindValidation},
		{name: "unknown column", body: sqlJSON(t, "demo", "SELECT nope FROM devices", 0), want: 400, kind: lakegate.KindValidation},
		{name: "unknown database", body: sqlJSON(t, "nope", "SELECT 1", 0), want: 404, kind: lakegate.KindNotFound},
		{name: "missing sql", body: `{"database":"demo"}`, want: 400, kind: lakegate.KindValidation},
		{name: "missing database", body: `{"sql":"SELECT 1"}`, want: 400, kind: lakegate.KindValidation},
		{name: "unknown field", body: `{"database":"demo","sql":"SELECT 1","db":"x"}`, want: 400, kind: lakegate.KindValidation},
		{name: "broken json", body: `{"database":`, want: 400, kind: lakegate.KindValidation},
		{name: "empty body", body: ``, want: 400, kind: lakegate.KindValidation},
		{name: "array body", body: `[]`, want: 400, kind: lakegate.KindValidation},
		{name: "second object after the first", body: `{"database":"demo","sql":"SELECT 1"} {"x":1}`, want: 400, kind: lakegate.KindValidation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := st.do(t, "POST", "/rest/sql", tok, tt.body)
			if r.code != tt.want {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tt.want)
			}
			if tt.want != http.StatusOK {
				if e := r.errBody(t); e.Error.Kind != tt.kind {
					t.Errorf("got kind %v (%s), want %v", e.Error.Kind, e.Error.Message, tt.kind)
				}
				return
			}
			var res struct {
				Columns   []query.ResultColumn
				Rows      [][]json.Number
				RowCount  int `json:"row_count"`
				Truncated bool
			}
			r.decode(t, &res)
			if len(res.Rows) != tt.rows || res.RowCount != tt.rows || res.Truncated != tt.truncated || len(res.Columns) != 1 {
				t.Errorf("got %d rows (row_count %d, truncated %v, %d columns), want %d rows, truncated %v, 1 column",
					len(res.Rows), res.RowCount, res.Truncated, len(res.Columns), tt.rows, tt.truncated)
			}
			if tt.firstRowFirst != "" && len(res.Rows) > 0 && res.Rows[0][0].String() != tt.firstRowFirst {
				t.Errorf("first value: got %v, want %v", res.Rows[0][0], tt.firstRowFirst)
			}
		})
	}
}

func TestIngest(t *testing.T) {
	st := newStack(t, nil)
	tok := token("w", lakegate.RoleWriter)
	device := func(id string) string {
		return `{"id": ` + id + `, "name": "d` + id + `", "site": "lab", "kind": "probe", "installed": "2024-05-01", "active": true}`
	}
	reading := `{"device_id": 1, "ts": "2024-05-01T10:00:00Z", "temperature": 21.5, "humidity": 40, "status": "ok"}`

	good := []struct {
		name, table, body string
		inserted          int64
	}{
		{"json array", "devices", "[" + device("1001") + ", " + device("1002") + "]", 2},
		{"json array with spaces", "devices", "\n  [ " + device("1003") + " ]\n", 1},
		{"ndjson", "readings", reading + "\n" + reading + "\r\n\n" + reading, 3},
		{"ndjson one row no newline", "devices", device("1004"), 1},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			before := st.count(t, tt.table)
			r := st.do(t, "POST", "/data/demo/"+tt.table, tok, tt.body)
			var got struct{ Inserted int64 }
			r.decode(t, &got)
			if r.code != http.StatusOK || got.Inserted != tt.inserted {
				t.Fatalf("got %d %s, want 200 inserted %d", r.code, r.body, tt.inserted)
			}
			if after := st.count(t, tt.table); after != before+tt.inserted {
				t.Errorf("%s: got %d rows, want %d", tt.table, after, before+tt.inserted)
			}
		})
	}

	bad := []struct {
		name, path, body string
		want             int
		msg              string
		knownBug         string // set: the case is skipped until the bug is fixed
	}{
		{"unknown column names the row", "/data/demo/devices", "[" + device("2001") + `, {"id": 2002, "colour": "red"}]`, 400, "row 1", ""},
		{"bad value names row and column", "/data/demo/devices", "[" + strings.Replace(device("2003"), `"active": true`, `"active": "maybe"`, 1) + "]", 400, `"active"`, ""},
		{"duplicate key is atomic", "/data/demo/devices", "[" + device("2004") + ", " + device("1") + "]", 400, "", ""},
		{"empty body", "/data/demo/devices", "", 400, "empty body", ""},
		{"blank body", "/data/demo/devices", " \n\t ", 400, "empty body", ""},
		{"empty array", "/data/demo/devices", "[]", 400, "no rows", ""},
		{"array of number", "/data/demo/devices", "[1]", 400, "row 0", ""},
		{"array with null", "/data/demo/devices", "[" + device("2005") + ", null]", 400, "row 1", ""},
		{"empty object", "/data/demo/devices", "[{}]", 400, "row 0", ""},
		{"broken json", "/data/demo/devices", `[{"id": 2006, "name": `, 400, "row 0", ""},
		{"unclosed array", "/data/demo/devices", "[" + device("2007"), 400, "row 1", ""},
		{"ndjson null", "/data/demo/devices", device("2008") + "\nnull\n", 400, "row 1", ""},
		{"ndjson garbage", "/data/demo/devices", device("2009") + "\n{oops}\n", 400, "row 1", ""},
		{"scalar", "/data/demo/devices", `"row"`, 400, "row 0", ""},
		{"unknown table", "/data/demo/nope", "[" + device("2010") + "]", 404, `"nope"`, ""},
		{"unknown database", "/data/nope/devices", "[" + device("2011") + "]", 404, `"nope"`, ""},
		{"trailing data after array", "/data/demo/devices", "[" + device("2012") + "] [1]", 400, "after the closing ]", ""},
		{"trailing garbage after array", "/data/demo/devices", "[" + device("2013") + "] x", 400, "after the closing ]", ""},
	}
	before := st.count(t, "devices")
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if tt.knownBug != "" {
				t.Skip("known bug: " + tt.knownBug)
			}
			r := st.do(t, "POST", tt.path, tok, tt.body)
			if r.code != tt.want {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tt.want)
			}
			if e := r.errBody(t); !strings.Contains(e.Error.Message, tt.msg) {
				t.Errorf("got %+v, want a message containing %q", e.Error, tt.msg)
			}
			if after := st.count(t, "devices"); after != before {
				t.Errorf("devices: got %d rows, want %d (nothing inserted)", after, before)
			}
		})
	}
}

func TestAdminMCP(t *testing.T) {
	st := newStack(t, nil)
	admin, reader := token("a", lakegate.RoleAdmin), token("r", lakegate.RoleReader)
	steps := []struct {
		name, method, path string
		enabled            bool
		sseCode            int
	}{
		{"status", "GET", "/admin/mcp/status", true, 0},
		{"disable", "POST", "/admin/mcp/disable", false, http.StatusServiceUnavailable},
		{"disable again", "POST", "/admin/mcp/disable", false, 0},
		{"status when off", "GET", "/admin/mcp/status", false, 0},
		{"enable", "POST", "/admin/mcp/enable", true, 0},
		{"enable again", "POST", "/admin/mcp/enable", true, 0},
	}
	for _, tt := range steps {
		t.Run(tt.name, func(t *testing.T) {
			r := st.do(t, tt.method, tt.path, admin, "")
			var got host.PluginStatus
			r.decode(t, &got)
			if r.code != http.StatusOK || got.Enabled != tt.enabled || (got.Since != nil) != tt.enabled {
				t.Fatalf("got %d %s, want 200 enabled %v", r.code, r.body, tt.enabled)
			}
			if got.Workers.Max != 10 || got.Sessions["sse"] != 0 {
				t.Errorf("got workers %+v sessions %v, want max 10 and no sessions", got.Workers, got.Sessions)
			}
			if st.plugin.Enabled() != tt.enabled {
				t.Errorf("plugin.Enabled: got %v, want %v", st.plugin.Enabled(), tt.enabled)
			}
			if tt.sseCode != 0 {
				sse := st.do(t, "GET", "/mcp/sse", reader, "")
				if e := sse.errBody(t); sse.code != tt.sseCode || e.Error.Kind != lakegate.KindUnavailable {
					t.Errorf("GET /mcp/sse: got %d %+v, want %d unavailable", sse.code, e.Error, tt.sseCode)
				}
				if rest := st.do(t, "GET", "/rest/databases", reader, ""); rest.code != http.StatusOK {
					t.Errorf("REST with MCP off: got %d, want 200", rest.code)
				}
			}
		})
	}
}
