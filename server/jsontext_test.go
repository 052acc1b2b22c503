package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

func TestValidText(t *testing.T) {
	cases := []struct {
		name string
		lit  string // the raw content of a JSON string literal
		want bool
	}{
		{"empty", ``, true},
		{"ascii", `hello`, true},
		{"utf-8", `héllo wörld ✓ 😀`, true},
		{"replacement character sent as UTF-8", "\uFFFD", true},
		{"replacement character escaped", `\ufffd`, true},
		{"escapes", `a\"b\\c\/d\b\f\n\r\t\u0041\u00e9`, true},
		{"surrogate pair", `\ud83d\ude00`, true},
		{"surrogate pair upper case", `\uD83D\uDE00`, true},
		{"escaped backslash before ud800", `\\ud800`, true},
		{"invalid byte", "caf\xe9", false},
		{"invalid byte after an escape", `\n` + "\xff", false},
		{"truncated sequence", "\xe2\x82", false},
		{"overlong encoding", "\xc0\xaf", false},
		{"surrogate encoded in UTF-8", "\xed\xa0\x80", false},
		{"lone high surrogate", `\ud800`, false},
		{"lone high surrogate upper case", `x\uDBFFy`, false},
		{"lone low surrogate", `\udc00`, false},
		{"high then a letter escape", `\ud800\u0041`, false},
		{"high then high", `\ud800\ud800`, false},
		{"low then high", `\udc00\ud800`, false},
		{"high at the end", `abc\ud83d`, false},
		{"pair then lone", `\ud83d\ude00\ude00`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := validText([]byte(tc.lit)); got != tc.want {
				t.Errorf("validText(%q): got %v, want %v", tc.lit, got, tc.want)
			}
			// The fast check over a whole body must flag every invalid
			// string (it may flag more).
			body := []byte(`[{"a": "` + tc.lit + `"}]`)
			if !tc.want && !invalidJSONText(body) {
				t.Errorf("invalidJSONText(%q): got false, want true", body)
			}
			if tc.want && invalidJSONText(body) {
				t.Errorf("invalidJSONText(%q): got true, want false", body)
			}
		})
	}
}

func TestInvalidRowText(t *testing.T) {
	cases := []struct {
		name, raw string
		key       string
		isKey     bool
		found     bool
	}{
		{"valid", `{"a": "x", "b": [1, "y"], "c": {"d": "z"}}`, "", false, false},
		{"after a comma and space", ` ,  {"a": "x", "b": "` + "\xff" + `"}`, "b", false, true},
		{"first column", `{"a": "\udc00", "b": "x"}`, "a", false, true},
		{"nested object", `{"a": 1, "doc": {"k": ["ok", "` + "\xc3" + `"]}, "z": 2}`, "doc", false, true},
		{"nested key", `{"doc": {"` + "\xff" + `": 1}}`, "doc", false, true},
		{"key", `{"ok": 1, "na` + "\xff" + `me": 2}`, "na\xffme", true, true},
		{"escaped quote before the bad byte", `{"a": "say \"hi\"` + "\xff" + `"}`, "a", false, true},
		{"key with an escape", `{"a\"b": "\ud800"}`, `a"b`, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key, isKey, found := invalidRowText([]byte(tc.raw))
			if key != tc.key || isKey != tc.isKey || found != tc.found {
				t.Errorf("got %q %v %v, want %q %v %v", key, isKey, found, tc.key, tc.isKey, tc.found)
			}
		})
	}
}

func TestReadRowsText(t *testing.T) {
	cases := []struct {
		name, body string
		msg        string // "": accepted
	}{
		{"array, second row", `[{"name": "ok"}, {"id": 1, "name": "caf` + "\xe9" + `"}]`, `row 1, column "name"`},
		{"ndjson, third row", "{\"name\": \"a\"}\n{\"name\": \"b\"}\n{\"site\": \"\\ud800\"}\n", `row 2, column "site"`},
		{"lone low surrogate", `[{"name": "\udfff"}]`, `row 0, column "name"`},
		{"bad column name", `[{"na` + "\xff" + `me": "x"}]`, `row 0: column name "na\xffme"`},
		{"good pair", `[{"name": "\ud83d\ude00"}]`, ""},
		{"escaped backslash", `[{"name": "\\ud800"}]`, ""},
		{"replacement character", `[{"name": "\ufffd` + "\uFFFD" + `"}]`, ""},
		{"good rows before a syntax error keep the syntax error", `[{"name": "a"}, {"name": ` + "\xff" + `}]`, "row 1: invalid character"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := readRows(strings.NewReader(tc.body))
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("got %v, want rows", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got rows %v, want an error naming %q", rows, tc.msg)
			}
			if !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "validation_error") {
				t.Errorf("got %v, want a validation error naming %q", err, tc.msg)
			}
		})
	}
}

// TestIngestText sends invalid UTF-8 text to the ingest route: refused
// (400) naming row and column, nothing stored; valid text, including a
// surrogate pair and U+FFFD itself, is stored as sent.
func TestIngestText(t *testing.T) {
	st := newStack(t, nil)
	tok := token("w", lakegate.RoleWriter)
	device := func(id, name string) string {
		return `{"id": ` + id + `, "name": "` + name + `", "site": "lab", "kind": "probe", "installed": "2024-05-01", "active": true}`
	}
	before := st.count(t, "devices")
	for _, tc := range []struct{ name, body, msg string }{
		{"invalid byte in the second row", "[" + device("3001", "ok") + ", " + device("3002", "caf\xe9") + "]", `row 1, column "name"`},
		{"lone surrogate", "[" + device("3003", `\ud800`) + "]", `row 0, column "name"`},
		{"ndjson", device("3004", "ok") + "\n" + device("3005", "x\xff") + "\n", `row 1, column "name"`},
		{"with an idempotency key", "[" + device("3006", "ok") + ", " + device("3007", `\udc00`) + "]", `row 1, column "name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.name == "with an idempotency key" {
				hdr = []string{"Idempotency-Key", "text-1"}
			}
			r := st.do(t, "POST", "/data/demo/devices", tok, tc.body, hdr...)
			if r.code != http.StatusBadRequest {
				t.Fatalf("got %d %s, want 400", r.code, r.body)
			}
			if e := r.errBody(t); e.Error.Kind != "validation_error" || !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("got %+v, want a validation error naming %q", e.Error, tc.msg)
			}
			if after := st.count(t, "devices"); after != before {
				t.Errorf("devices: got %d rows, want %d (nothing inserted)", after, before)
			}
		})
	}
	good := `[` + device("3101", `\ud83d\ude00 caf\u00e9`) + `, ` + device("3102", "\uFFFD") + `]`
	if r := st.do(t, "POST", "/data/demo/devices", tok, good); r.code != http.StatusOK {
		t.Fatalf("got %d %s, want 200", r.code, r.body)
	}
	r := st.do(t, "POST", "/rest/sql", token("r", lakegate.RoleReader),
		sqlJSON(t, "demo", "SELECT name FROM devices WHERE id IN (3101, 3102) ORDER BY id", 0))
	var res struct{ Rows [][]string }
	r.decode(t, &res)
	if got, want := res.Rows, [][]string{{"😀 café"}, {"\uFFFD"}}; len(got) != 2 || got[0][0] != want[0][0] || got[1][0] != want[1][0] {
		b, _ := json.Marshal(got)
		t.Errorf("got %s, want %q", b, want)
	}
}
