package transport

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lakegate/lakegate/mcp/internal/mcptest"
	"github.com/lakegate/lakegate/mcp/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestPlainNumber(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"0", true}, {"7", true}, {"-7", true}, {"999999999999999", true}, {"-999999999999999", true},
		{"1000000000000000", false}, {"-0", false}, {"01", false}, {"1.5", false}, {"1e3", false}, {"-", false}, {"", false},
	} {
		if got := plainNumber([]byte(tc.in)); got != tc.want {
			t.Errorf("plainNumber(%q): got %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestIDAliasRoundTrip: decodeMessage then encodeMessage gives every id
// back as sent, on the framed result path and the SDK's error path.
func TestIDAliasRoundTrip(t *testing.T) {
	for _, tc := range mcptest.IDCases {
		t.Run(tc.Name, func(t *testing.T) {
			msg, err := decodeMessage([]byte(`{"jsonrpc":"2.0","id":` + tc.ID + `,"method":"ping"}`))
			if err != nil {
				t.Fatal(err)
			}
			req := msg.(*jsonrpc.Request)
			for _, resp := range []*jsonrpc.Response{
				{ID: req.ID, Result: json.RawMessage(`{}`)},
				{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}},
			} {
				data, err := encodeMessage(resp)
				if err != nil {
					t.Fatal(err)
				}
				if got := mcptest.RawID(t, data); !mcptest.SameID(got, tc.ID) {
					t.Errorf("id: got %s, want %s (%s)", got, tc.ID, data)
				}
			}
		})
	}
}

func TestDecodeMessageLikeSDK(t *testing.T) {
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","arguments":{"id":1.5}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":null,"method":"n"}`,
		`{"jsonrpc":"2.0","id":3,"result":{"x":1}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"m","data":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":4,"method":""}`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`[]`,
		`7`,
	} {
		want, wantErr := jsonrpc.DecodeMessage([]byte(in))
		got, err := decodeMessage([]byte(in))
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: got error %v, want %v", in, err, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		g, _ := jsonrpc.EncodeMessage(got)
		w, _ := jsonrpc.EncodeMessage(want)
		if !bytes.Equal(g, w) {
			t.Errorf("%s: got %s, want %s", in, g, w)
		}
	}
	// Stricter than the SDK, which reads one value and ignores the rest.
	if _, err := decodeMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"} x`)); err == nil {
		t.Error("trailing data: got no error")
	}
}

// FuzzDecodeMessage: where both decode a message, decodeMessage agrees
// with the SDK's decoder, but for the ids the SDK cannot keep.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":[1,2]}}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"lakegate-id:1","method":"x"}`,
		`{"jsonrpc":"2.0","ID":1,"id":2,"Method":"a","method":"b"}`,
		`{"jsonrpc":"2.0","id":7,"result":null,"error":null}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1.5}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeMessage(data)
		want, wantErr := jsonrpc.DecodeMessage(data)
		if err != nil || wantErr != nil {
			return
		}
		var gotID, wantID jsonrpc.ID
		switch g := got.(type) {
		case *jsonrpc.Request:
			w, ok := want.(*jsonrpc.Request)
			if !ok || g.Method != w.Method || (g.Method != methodCancelled && !bytes.Equal(g.Params, w.Params)) {
				t.Fatalf("%s: got %+v, want %+v", data, g, want)
			}
			gotID, wantID = g.ID, w.ID
		case *jsonrpc.Response:
			w, ok := want.(*jsonrpc.Response)
			if !ok || !bytes.Equal(g.Result, w.Result) || (g.Error == nil) != (w.Error == nil) {
				t.Fatalf("%s: got %+v, want %+v", data, g, want)
			}
			gotID, wantID = g.ID, w.ID
		}
		text, aliased := aliasText(gotID)
		if !aliased {
			if gotID != wantID {
				t.Fatalf("%s: id got %v, want %v", data, gotID.Raw(), wantID.Raw())
			}
			return
		}
		if s, ok := wantID.Raw().(string); ok {
			var orig string
			if json.Unmarshal([]byte(text), &orig) != nil || orig != s {
				t.Fatalf("%s: alias %q of the string id %q", data, text, s)
			}
		}
	})
}

func TestAliasBody(t *testing.T) {
	for _, tc := range []struct {
		name, in, logID string
		aliased         bool
	}{
		{"plain", `{"jsonrpc":"2.0","id":5,"method":"ping"}`, "5", false},
		{"string", `{"jsonrpc":"2.0","id":"a","method":"ping"}`, "a", false},
		{"big", `{"jsonrpc":"2.0","id":1e30,"method":"ping"}`, "1e30", true},
		{"key case matters", `{"jsonrpc":"2.0","ID":1e30,"method":"ping"}`, "", false},
		{"cancelled", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1.5}}`, "", true},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2.5,"method":"ping"}]`, "", true},
		{"not JSON", `{"jsonrpc"`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, logID, aliased := aliasBody([]byte(tc.in))
			if logID != tc.logID || aliased != tc.aliased {
				t.Errorf("got %q %v, want %q %v", logID, aliased, tc.logID, tc.aliased)
			}
			if !aliased && string(out) != tc.in {
				t.Errorf("body changed without an alias: %s", out)
			}
		})
	}
}

func FuzzRestoreIDs(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"lakegate-id:1e30","result":{}}`,
		`{"jsonrpc":"2.0","id":"lakegate-id:\"lakegate-id:5\"","result":{}}`,
		`{"jsonrpc":"2.0","id":"lakegate-id:`,
		`{"jsonrpc":"2.0","id":"lakegate-id:\`,
		`{"jsonrpc":"2.0","id":"lakegate-id:{","result":{}}`,
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"lakegate-id:1.5\",\"result\":{}}\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := restoreIDs(data)
		if json.Valid(data) && !json.Valid(out) {
			t.Errorf("restoreIDs(%q) = %q: valid JSON became invalid", data, out)
		}
	})
}

// TestDecodeMessageDepth: a message nested past wire.MaxDepth is refused, as
// the SDK refuses it, before the recursive parser sees it; one at the
// bound is read.
func TestDecodeMessageDepth(t *testing.T) {
	nested := func(depth int) []byte { // the message and its params are two levels
		n := depth - 2
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}`)
	}
	if _, err := decodeMessage(nested(wire.MaxDepth)); err != nil {
		t.Errorf("%d levels: %v", wire.MaxDepth, err)
	}
	for _, data := range [][]byte{nested(wire.MaxDepth + 1), []byte(strings.Repeat("[", 1<<20))} {
		if _, err := decodeMessage(data); err == nil || !strings.Contains(err.Error(), "deeper than") {
			t.Errorf("%d bytes nested past the bound: got %v", len(data), err)
		}
	}
	// Brackets inside strings do not count.
	if _, err := decodeMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"` + strings.Repeat(`[\"`, 2000) + `"}}`)); err != nil {
		t.Errorf("brackets in a string: %v", err)
	}
}
