package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/config"
)

// TestSuggestions: on PostgreSQL, an unknown table, column or function in
// SQL answers with close candidates over MCP (run_sql, legacy SSE) and
// REST (/rest/sql, the sql command); a caller with a table list is never
// shown a table it may not read; an unknown tool lists the tools.
func TestSuggestions(t *testing.T) {
	pgRole(t, "lg_it_readings", "readings")
	e := start(t, envOptions{config: func(c *config.Config) {
		// devicez is not in the database: a typo in the list, or a table
		// dropped since.
		c.Access = map[string]config.RoleAccess{"analyst": {Tables: map[string][]string{"iot": {"readings", "devicez"}}, PGRole: "lg_it_readings"}}
	}})
	reader := token("alice", "reader")
	ann := roleToken(t, "ann", "reader", "analyst")
	type hintCase struct {
		sql       string
		want, not []string
	}
	open := []hintCase{
		{"SELECT * FROM reading", []string{`did you mean "readings"?`}, nil},
		{"SELECT temperatur FROM readings", []string{`did you mean "temperature"?`}, nil},
		{"SELECT lenght(status) FROM readings", []string{`did you mean "length"?`}, nil},
		{"SELECT zqxjkvw(status) FROM readings", nil, []string{"did you mean"}},
	}
	restricted := []hintCase{
		{"SELECT * FROM devicez", []string{"known tables: readings"}, []string{"devices", "did you mean"}},
		{"SELECT sitee FROM readings", nil, []string{"site"}},
		{"SELECT * FROM device", []string{`did you mean "devicez"?`}, []string{`"devices"`}},
	}
	check := func(t *testing.T, hint string, tc hintCase) {
		t.Helper()
		for _, w := range tc.want {
			if !strings.Contains(hint, w) {
				t.Errorf("%s: got hint %q, want %q", tc.sql, hint, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(hint, n) {
				t.Errorf("%s: got hint %q, want no %q", tc.sql, hint, n)
			}
		}
	}
	type errBody struct {
		Error struct {
			Kind, Message, Hint string
		} `json:"error"`
	}
	rest := func(t *testing.T, tok string, cases []hintCase) {
		for _, tc := range cases {
			code, body := post(t, e.base+"/rest/sql", tok, fmt.Sprintf(`{"database":"iot","sql":%q}`, tc.sql))
			var b errBody
			if err := json.Unmarshal([]byte(body), &b); err != nil || code < 400 {
				t.Fatalf("%s: got %d %s, want an error", tc.sql, code, body)
			}
			check(t, b.Error.Hint, tc)
		}
	}
	mcpCall := func(t *testing.T, tok string, cases []hintCase) {
		cs := e.connect(t, tok)
		for _, tc := range cases {
			res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": tc.sql}})
			if err != nil {
				t.Fatal(err)
			}
			var b errBody
			text := res.Content[0].(*mcpsdk.TextContent).Text
			if err := json.Unmarshal([]byte(text), &b); err != nil || !res.IsError {
				t.Fatalf("%s: got %s, want an isError result", tc.sql, text)
			}
			check(t, b.Error.Hint, tc)
		}
	}
	t.Run("rest", func(t *testing.T) { rest(t, reader, open) })
	t.Run("mcp run_sql", func(t *testing.T) { mcpCall(t, reader, open) })
	t.Run("sql command", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.base+"/", nil)
		req.Header.Set("command", `sql iot format = json "SELECT * FROM reading"`)
		resp, err := httpClient(reader).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b errBody
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil || resp.StatusCode != 400 {
			t.Fatalf("got %d (%v), want 400", resp.StatusCode, err)
		}
		check(t, b.Error.Hint, open[0])
	})
	t.Run("restricted rest", func(t *testing.T) { rest(t, ann, restricted) })
	t.Run("restricted mcp run_sql", func(t *testing.T) { mcpCall(t, ann, restricted) })
	t.Run("unknown tool", func(t *testing.T) {
		cs := e.connect(t, reader)
		_, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sq", Arguments: map[string]any{}})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams ||
			!strings.Contains(we.Message, `did you mean "run_sql"?`) || !strings.Contains(we.Message, "describe_table") {
			t.Errorf("got %v, want invalid params naming run_sql and listing the tools", err)
		}
	})
}
