package mcp

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
)

// TestUnknownToolListsTools: a call of a tool that does not exist answers
// invalid params whose message names the close tools and lists them all,
// with the list in the error's data; a registered tool's own errors are
// untouched.
func TestUnknownToolListsTools(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	srv := serveHTTP(t, p)
	for _, version := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			cs := connectStreamable(t, srv.URL, "alice", version, nil)
			for _, tc := range []struct {
				name, tool, want, not string
			}{
				{"one edit away", "run_sq", `unknown tool "run_sq"; did you mean "run_sql"? available tools: `, ""},
				{"swapped letters", "lsit_tables", `did you mean "list_tables"?`, ""},
				{"nothing close", "zqxjkvw", `unknown tool "zqxjkvw"; available tools: `, "did you mean"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					ctx, cancel := contextWithTimeout(t, 10*time.Second)
					defer cancel()
					_, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: tc.tool, Arguments: map[string]any{}})
					var we *jsonrpc.Error
					if !errors.As(err, &we) {
						t.Fatalf("got %v, want a JSON-RPC error", err)
					}
					if we.Code != jsonrpc.CodeInvalidParams {
						t.Errorf("got code %d, want %d", we.Code, jsonrpc.CodeInvalidParams)
					}
					if !strings.Contains(we.Message, tc.want) || tc.not != "" && strings.Contains(we.Message, tc.not) {
						t.Errorf("got message %q, want %q (and no %q)", we.Message, tc.want, tc.not)
					}
					for _, n := range p.tools.Names() {
						if !strings.Contains(we.Message, n) {
							t.Errorf("got message %q, want tool %s listed", we.Message, n)
						}
					}
					var data struct {
						Kind  lakegate.Kind `json:"kind"`
						Hint  string        `json:"hint"`
						Tools []string      `json:"tools"`
					}
					if err := json.Unmarshal(we.Data, &data); err != nil {
						t.Fatalf("data %s: %v", we.Data, err)
					}
					if data.Kind != lakegate.KindNotFound || !slices.Equal(data.Tools, p.tools.Names()) || !strings.Contains(data.Hint, "available tools: ") {
						t.Errorf("got data %s, want not_found with the tools %v", we.Data, p.tools.Names())
					}
				})
			}
			t.Run("a known tool's own errors", func(t *testing.T) {
				ctx, cancel := contextWithTimeout(t, 10*time.Second)
				defer cancel()
				res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sqll": "x"}})
				if err != nil {
					if strings.Contains(err.Error(), "unknown tool") {
						t.Fatalf("got %v, want run_sql's own error", err)
					}
					return
				}
				if !res.IsError || strings.Contains(res.Content[0].(*mcpsdk.TextContent).Text, "unknown tool") {
					t.Errorf("got %+v, want run_sql's own error", res.Content)
				}
			})
		})
	}
}

// TestRunSQLSuggests: run_sql's unknown table, column and function on the
// SQLite demo come back with close candidates.
func TestRunSQLSuggests(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	srv := serveHTTP(t, p)
	cs := connectStreamable(t, srv.URL, "alice", "2025-11-25", nil)
	for _, tc := range []struct{ sql, want string }{
		{"SELECT * FROM reading", `did you mean \"readings\"?`},
		{"SELECT temperatur FROM readings", `did you mean \"temperature\"?`},
		{"SELECT lenght(status) FROM readings", `did you mean \"length\"?`},
	} {
		ctx, cancel := contextWithTimeout(t, 10*time.Second)
		res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": tc.sql}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*mcpsdk.TextContent).Text
		if !res.IsError || !strings.Contains(text, tc.want) || !strings.Contains(text, `"kind":"validation_error"`) {
			t.Errorf("%s: got %s, want a validation error with %s", tc.sql, text, tc.want)
		}
	}
}
