// Package mcptest is test support shared by the MCP plugin's packages
// (mcp and its internal parts): data and helpers their tests use alike.
// Only tests import it.
package mcptest

import (
	"encoding/json"
	"strings"
	"testing"
)

// IDCases are JSON-RPC ids as a client may write them; each must come
// back byte for byte (strings: as the same string).
var IDCases = []struct {
	Name, ID string
}{
	{"small integer", `7`},
	{"zero", `0`},
	{"negative", `-42`},
	{"15 digits", `999999999999999`},
	{"past 2^53", `9007199254740993`},
	{"past int64", `123456789012345678901234567890`},
	{"negative past int64", `-123456789012345678901234567890`},
	{"fraction", `1.5`},
	{"exponent", `1e3`},
	{"signed exponent", `-2.5E+10`},
	{"integer written as float", `1.0`},
	{"minus zero", `-0`},
	{"string", `"abc"`},
	{"empty string", `""`},
	{"string with escapes", `"caf\u00e9 \"x\""`},
	{"string that looks like an alias", `"lakegate-id:5"`},
	{"string that looks like an escaped alias", `"lakegate-id:\"lakegate-id:5\""`},
}

// SameID reports whether got, the raw id of a reply, is want as sent:
// the same bytes, or for strings the same string.
func SameID(got, want string) bool {
	if got == want {
		return true
	}
	if !strings.HasPrefix(want, `"`) {
		return false
	}
	var g, w string
	return json.Unmarshal([]byte(got), &g) == nil && json.Unmarshal([]byte(want), &w) == nil && g == w
}

// RawID is the id of one encoded JSON-RPC message, as its bytes.
func RawID(t testing.TB, msg []byte) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("reply %q: %v", msg, err)
	}
	return string(m["id"])
}
