package integration

import (
	"strings"
	"testing"

	"github.com/lakegate/lakegate/config"
)

// TestServerInfoFunctions: SQL functions that read server information
// (version(), current_setting(), inet_server_port()) follow
// server_info_functions on every way in, REST and MCP: by default only
// the admin role may call them; all opens them to readers; none closes
// them to everyone, admin included.
func TestServerInfoFunctions(t *testing.T) {
	const sql = "SELECT version() AS v, current_setting('server_version') AS s, inet_server_port() AS p"
	for _, tc := range []struct {
		policy            string
		readerOK, adminOK bool
		refusal           int    // status of a refused REST call
		kind              string // kind of a refused tool call
	}{
		{"", false, true, 403, "forbidden"},
		{config.ServerInfoAdmin, false, true, 403, "forbidden"},
		{config.ServerInfoAll, true, true, 0, ""},
		{config.ServerInfoNone, false, false, 400, "validation_error"},
	} {
		t.Run("policy "+tc.policy, func(t *testing.T) {
			e := start(t, envOptions{config: func(c *config.Config) { c.ServerInfoFunctions = tc.policy }})
			for _, who := range []struct {
				role string
				ok   bool
			}{{"reader", tc.readerOK}, {"admin", tc.adminOK}} {
				tok := token("someone", who.role)
				t.Run("rest "+who.role, func(t *testing.T) {
					code, body := post(t, e.base+"/rest/sql", tok, `{"database":"iot","sql":"`+sql+`"}`)
					if who.ok {
						if code != 200 || !strings.Contains(body, "PostgreSQL") {
							t.Errorf("got %d %s, want 200 with the server version", code, body)
						}
						return
					}
					if code != tc.refusal || !strings.Contains(body, "server_info_functions") || !strings.Contains(body, "version") {
						t.Errorf("got %d %s, want %d naming version and server_info_functions", code, body, tc.refusal)
					}
				})
				t.Run("mcp "+who.role, func(t *testing.T) {
					cs := e.connect(t, tok)
					res := callJSON(t, cs, "run_sql", map[string]any{"database": "iot", "sql": sql}, nil)
					if who.ok {
						if res.IsError {
							t.Errorf("got an error result %v, want rows", res.Content)
						}
						return
					}
					if kind := errorKind(t, res); kind != tc.kind {
						t.Errorf("got kind %s, want %s", kind, tc.kind)
					}
				})
			}
		})
	}
}
