package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lakegate/lakegate"
)

func TestCommands(t *testing.T) {
	st := newStack(t, nil)
	admin := token("root", lakegate.RoleAdmin)
	reader := token("alice", lakegate.RoleReader)

	ok := []struct {
		name, tok, command, want string
	}{
		{"get status", reader, "get status", `"status":"running"`},
		{"get databases", reader, "get databases", `"name":"demo"`},
		{"case and spacing", reader, "  GET   Databases ", `"name":"demo"`},
		{"get tables", reader, "get tables where dbms = demo", `"readings"`},
		{"get tables without spaces", reader, "get tables where dbms=demo", `"devices"`},
		{"get columns", reader, "get columns where dbms = demo and table = devices", `"primary_key":["id"]`},
		{"sql", reader, `sql demo format = json "SELECT count(*) AS n FROM devices WHERE site = 'oslo'"`, `"row_count":1`},
		{"sql without format", reader, `sql demo 'SELECT 1 AS one'`, `"one"`},
		{"get mcp status", admin, "get mcp status", `"enabled":true`},
		{"exit mcp server", admin, "exit mcp server", `"enabled":false`},
		{"run mcp server", admin, "run mcp server", `"enabled":true`},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			for _, method := range []string{"GET", "POST"} {
				r := st.do(t, method, "/", tt.tok, "", "command", tt.command)
				if r.code != http.StatusOK || !strings.Contains(string(r.body), tt.want) {
					t.Errorf("%s: got %d %s, want 200 containing %s", method, r.code, r.body, tt.want)
				}
			}
		})
	}

	t.Run("json body", func(t *testing.T) {
		r := st.do(t, "POST", "/", reader, `{"command": "get databases"}`)
		if r.code != http.StatusOK || !strings.Contains(string(r.body), `"demo"`) {
			t.Errorf("got %d %s, want the databases", r.code, r.body)
		}
	})

	bad := []struct {
		name, tok, command string
		code               int
		kind               lakegate.Kind
		mention            string
	}{
		{"no command", reader, "", 400, lakegate.KindValidation, "known commands"},
		{"unknown", reader, "drop everything", 400, lakegate.KindValidation, "run mcp server"},
		{"admin only", reader, "exit mcp server", 403, lakegate.KindForbidden, "admin"},
		{"missing where", reader, "get tables", 400, lakegate.KindValidation, `"dbms"`},
		{"bad where", reader, "get tables dbms = demo", 400, lakegate.KindValidation, "where"},
		{"half condition", reader, "get tables where dbms", 400, lakegate.KindValidation, "key = value"},
		{"or is not and", reader, "get columns where dbms = demo or table = x", 400, lakegate.KindValidation, "and"},
		{"unknown db", reader, "get tables where dbms = nope", 404, lakegate.KindNotFound, "nope"},
		{"unquoted sql", reader, "sql demo SELECT 1", 400, lakegate.KindValidation, "sql DB"},
		{"bad format", reader, `sql demo format = xml "SELECT 1"`, 400, lakegate.KindValidation, "json"},
		{"bad option", reader, `sql demo limit = 5 "SELECT 1"`, 400, lakegate.KindValidation, "format"},
		{"write refused", reader, `sql demo "DELETE FROM devices"`, 400, lakegate.KindValidation, ""},
		{"unterminated quote", reader, `sql demo "SELECT 1`, 400, lakegate.KindValidation, "unterminated"},
		{"no token", "", "get status", 401, lakegate.KindAuth, ""},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			r := st.do(t, "GET", "/", tt.tok, "", "command", tt.command)
			if r.code != tt.code {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tt.code)
			}
			e := r.errBody(t)
			if e.Error.Kind != tt.kind || !strings.Contains(e.Error.Message+" "+e.Error.Hint, tt.mention) {
				t.Errorf("got %+v, want kind %s mentioning %q", e.Error, tt.kind, tt.mention)
			}
		})
	}
	if n := st.count(t, "devices"); n == 0 {
		t.Errorf("devices after commands: got %d rows, want the demo rows intact", n)
	}
}

// TestCommandErrorsDoNotEchoInput: an error names the unknown input by a
// short excerpt, never the whole of it (a large body in, a small error out).
func TestCommandErrorsDoNotEchoInput(t *testing.T) {
	st := newStack(t, nil)
	reader := token("alice", lakegate.RoleReader)
	huge := strings.Repeat("é", 1<<20) // 2 MB, multi-byte
	for _, tc := range []struct{ name, command string }{
		{"unknown command", "frobnicate " + huge},
		{"bad where", "get tables " + huge},
		{"bad sql option", `sql demo ` + huge + ` = json "SELECT 1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]string{"command": tc.command})
			r := st.do(t, "POST", "/", reader, string(body))
			if r.code != http.StatusBadRequest {
				t.Fatalf("got %d, want 400", r.code)
			}
			if len(r.body) > 4096 || !utf8.Valid(r.body) {
				t.Errorf("got a %d-byte error (valid UTF-8: %v), want a short one", len(r.body), utf8.Valid(r.body))
			}
		})
	}
}
