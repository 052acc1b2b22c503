package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/lakegate/lakegate/internal/ssetest"
	"github.com/lakegate/lakegate/internal/testutil"
)

// idCases are JSON-RPC ids as a client may write them; each must come
// back byte for byte (strings: as the same string).
var idCases = []struct {
	name, id string
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

// sameID reports whether got, the raw id of a reply, is want as sent:
// the same bytes, or for strings the same string.
func sameID(got, want string) bool {
	if got == want {
		return true
	}
	if !strings.HasPrefix(want, `"`) {
		return false
	}
	var g, w string
	return json.Unmarshal([]byte(got), &g) == nil && json.Unmarshal([]byte(want), &w) == nil && g == w
}

// rawID is the id of one encoded JSON-RPC message, as its bytes.
func rawID(t *testing.T, msg []byte) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("reply %q: %v", msg, err)
	}
	return string(m["id"])
}

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
	for _, tc := range idCases {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := decodeMessage([]byte(`{"jsonrpc":"2.0","id":` + tc.id + `,"method":"ping"}`))
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
				if got := rawID(t, data); !sameID(got, tc.id) {
					t.Errorf("id: got %s, want %s (%s)", got, tc.id, data)
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

// sseClient is a raw legacy SSE session: it POSTs JSON-RPC text and reads
// the raw replies from the event stream.
type sseClient struct {
	t        *testing.T
	endpoint string
	stream   *ssetest.Stream
}

func openSSE(t *testing.T, base, sub string) *sseClient {
	t.Helper()
	stream, err := ssetest.Open(t.Context(), clientFor(sub), base+"/mcp/sse", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stream.Close)
	ev, err := stream.Next(10 * time.Second)
	if err != nil || ev.Name != "endpoint" {
		t.Fatalf("got %+v, %v; want the endpoint event", ev, err)
	}
	return &sseClient{t: t, endpoint: base + ev.Data, stream: stream}
}

func (s *sseClient) post(body string) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(s.t.Context(), http.MethodPost, s.endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := clientFor("alice").Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		s.t.Fatalf("POST %s: got %d %s, want 202", body, resp.StatusCode, b)
	}
}

// next is the next reply on the event stream (notifications and server
// requests are skipped).
func (s *sseClient) next() []byte {
	s.t.Helper()
	for {
		ev, err := s.stream.Next(10 * time.Second)
		switch {
		case err != nil:
			s.t.Fatalf("no reply: %v", err)
		case ev.Name == "" && ev.Data == "":
			// A comment.
		case ev.Name != "message":
			s.t.Fatalf("got event %+v, want a message", ev)
		case !strings.Contains(ev.Data, `"method":`):
			return []byte(ev.Data)
		}
	}
}

// streamablePost POSTs one message to /mcp and returns the data of the
// reply (an SSE event or a JSON body, whatever the status) and the
// session id.
func streamablePost(t *testing.T, base string, headers map[string]string, body string) ([]byte, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := clientFor("alice").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if len(b) == 0 {
		t.Fatalf("POST %s: got %d and no body, want a reply", body, resp.StatusCode)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The reply is the one message event; others carry no data.
		events, err := ssetest.ReadAll(bytes.NewReader(b))
		var data []string
		for _, ev := range events {
			if ev.Data != "" {
				if ev.Name != "message" {
					t.Fatalf("POST %s: got event %+v, want a message", body, ev)
				}
				data = append(data, ev.Data)
			}
		}
		if err != nil || len(data) != 1 {
			t.Fatalf("POST %s: got %q (%v), want one message event", body, b, err)
		}
		b = []byte(data[0])
	}
	return b, resp.Header.Get("Mcp-Session-Id")
}

// TestJSONRPCIDRoundTrip: over real HTTP, on legacy SSE and on Streamable
// HTTP (a 2025 session and the stateless 2026-07-28 revision), the reply
// to a request carries its id exactly as sent, for ids of any size and
// form, on results (ping, tools/call) and on errors (unknown prompt).
func TestJSONRPCIDRoundTrip(t *testing.T) {
	p, _ := newTestPlugin(t, Options{})
	srv := serveHTTP(t, p)
	sse := openSSE(t, srv.URL, "alice")
	sse.post(initBody)
	sse.next()
	sse.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, sid := streamablePost(t, srv.URL, nil, initBody)
	stateful := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}

	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + modernRevision +
		`","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}},`
	transports := []struct {
		name string
		meta string // the params' _meta member, with its comma
		send func(t *testing.T, method, name, body string) []byte
	}{
		{"sse", "", func(t *testing.T, _, _, body string) []byte { sse.post(body); return sse.next() }},
		{"streamable 2025-11-25", "", func(t *testing.T, _, _, body string) []byte {
			data, _ := streamablePost(t, srv.URL, stateful, body)
			return data
		}},
		{"streamable 2026-07-28", meta, func(t *testing.T, method, name, body string) []byte {
			h := map[string]string{"MCP-Protocol-Version": modernRevision, "Mcp-Method": method}
			if name != "" {
				h["Mcp-Name"] = name
			}
			data, _ := streamablePost(t, srv.URL, h, body)
			return data
		}},
	}
	requests := []struct{ name, method, tool, args string }{
		{"ping", "ping", "", ""},
		{"tools/call", "tools/call", "list_databases", `"name":"list_databases","arguments":{}`},
		{"error", "prompts/get", "no_such_prompt", `"name":"no_such_prompt"`},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			for _, rq := range requests {
				for _, tc := range idCases {
					t.Run(rq.name+"/"+tc.name, func(t *testing.T) {
						params := strings.TrimSuffix(tr.meta+rq.args, ",")
						body := `{"jsonrpc":"2.0","id":` + tc.id + `,"method":"` + rq.method + `","params":{` + params + `}}`
						reply := tr.send(t, rq.method, rq.tool, body)
						if got := rawID(t, reply); !sameID(got, tc.id) {
							t.Errorf("id: got %s, want %s; reply %s", got, tc.id, reply)
						}
						if rq.name == "error" && !bytes.Contains(reply, []byte(`"error"`)) {
							t.Errorf("got %s, want an error", reply)
						}
					})
				}
			}
		})
	}
}

// TestCancelAliasedID: notifications/cancelled naming a request by an id
// the SDK cannot hold stops that request, on both HTTP transports.
func TestCancelAliasedID(t *testing.T) {
	const id = `123456789012345678901234567890`
	call := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"run_sql","arguments":{"database":"iot","sql":"slow"}}}`
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}}`
	waitWorkers := func(t *testing.T, p *Plugin, want int) {
		t.Helper()
		if !testutil.Within(10*time.Second, func() bool { return p.Status().Workers.InUse == want }) {
			t.Fatalf("workers in use: got %d, want %d", p.Status().Workers.InUse, want)
		}
	}
	t.Run("sse", func(t *testing.T) {
		p, _ := newTestPlugin(t, Options{})
		srv := serveHTTP(t, p)
		sse := openSSE(t, srv.URL, "alice")
		sse.post(initBody)
		sse.next()
		sse.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		sse.post(call)
		waitWorkers(t, p, 1)
		sse.post(cancel)
		waitWorkers(t, p, 0)
	})
	t.Run("streamable", func(t *testing.T) {
		p, _ := newTestPlugin(t, Options{})
		srv := serveHTTP(t, p)
		_, sid := streamablePost(t, srv.URL, nil, initBody)
		h := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/mcp", strings.NewReader(call))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range h {
				req.Header.Set(k, v)
			}
			if resp, err := clientFor("alice").Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		waitWorkers(t, p, 1)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/mcp", strings.NewReader(cancel))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := clientFor("alice").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("cancel: got %d, want 202", resp.StatusCode)
		}
		waitWorkers(t, p, 0)
		<-done
	})
}
