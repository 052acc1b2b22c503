package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// marshalAsJSONRPC marshals a result as go-sdk's jsonrpc2 does for a
// response (NewResponse): an encoder that does not escape HTML.
func marshalAsJSONRPC(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rowsText is a CSV text of about n bytes, of rows like row.
func rowsText(n int, row string) string {
	var b strings.Builder
	b.WriteString("id,device_id,ts,temperature,note\n")
	for b.Len() < n {
		b.WriteString(row)
	}
	return b.String()
}

// decodedJSON is data decoded, to compare JSON values whatever their
// spelling.
func decodedJSON(t testing.TB, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v: %.200s", err, data)
	}
	return v
}

// textOnceOf is what EncodeTextOnce makes of r.
func textOnceOf(t testing.TB, r *mcpsdk.CallToolResult) mcpsdk.Result {
	t.Helper()
	res, err := EncodeTextOnce(func(context.Context, string, mcpsdk.Request) (mcpsdk.Result, error) {
		return r, nil
	})(context.Background(), "tools/call", nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A result with a plain text encodes, through EncodeTextOnce, to what
// go-sdk encodes it to: byte for byte with no <, > or & in it, and to the
// same JSON with them (in its texts or structured content); long or short, whatever the characters,
// among other content, with _meta and structured content (which may hold
// the text too), as an error. go-sdk's later changes to the result (its
// _meta) are in what it encodes. A result with no plain text, or one
// asking for input, is left as it is.
func TestEncodeTextOnceAsTheSDK(t *testing.T) {
	csv := rowsText(3000, "1042,7,2025-01-01 00:00:03+00,34.19,77.29,0.31,ok,\n")
	odd := rowsText(3000, "1042,\"a <b> & \"\"c\"\"\"\n") + "\u2028\u2029\x00\x1f\t\r\n\b\f\\\"</script>\xff\xfe é 漢字 😀"
	size := int64(9)
	results := map[string]*mcpsdk.CallToolResult{
		"rows":       {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: csv}}, StructuredContent: json.RawMessage(`{"row_count":3,"columns":[{"name":"id"}]}`)},
		"characters": {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: odd}}, StructuredContent: json.RawMessage(`{"sql":"SELECT 1 WHERE 1 < 2 AND a <> '&'"}`)},
		"several": {Content: []mcpsdk.Content{
			&mcpsdk.TextContent{Text: csv, Annotations: &mcpsdk.Annotations{Priority: 0.5}},
			&mcpsdk.TextContent{Text: "short"},
			&mcpsdk.ResourceLink{URI: "lakegate://blocks/x/0", Name: "block-0", Size: &size},
			&mcpsdk.TextContent{Text: csv},
		}, Meta: mcpsdk.Meta{"io.modelcontextprotocol/related-task": map[string]any{"taskId": "t1"}}},
		"structured holds the text": {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: csv}}, StructuredContent: map[string]any{"text": csv, "n": 1}},
		"error":                     {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: csv}}, IsError: true},
		"empty meta":                {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: csv}}, Meta: mcpsdk.Meta{}},
		"short":                     {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "id,ts\n1,2025-01-01T03:32:06Z\n# rows: 1\n"}}, StructuredContent: json.RawMessage(`{"row_count":1,"sql":"SELECT 1"}`)},
		"no plain text":             {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: csv, Meta: mcpsdk.Meta{"k": "v"}}, &mcpsdk.ResourceLink{URI: "lakegate://blocks/x/0", Name: "block-0"}}},
		"asks for input":            {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: csv}}, RequestState: "s"},
	}
	for name, r := range results {
		t.Run(name, func(t *testing.T) {
			res := textOnceOf(t, r)
			if _, taken := res.(textOnce); taken != (name != "no plain text" && name != "asks for input") {
				t.Errorf("taken: %v", taken)
			}
			check := func(when string) {
				got, want := marshalAsJSONRPC(t, res), marshalAsJSONRPC(t, r)
				if !reflect.DeepEqual(decodedJSON(t, got), decodedJSON(t, want)) {
					t.Errorf("%s: encodes to\n%.300s\nwant\n%.300s", when, got, want)
				}
				if !bytes.ContainsAny(got, "<>&") && !bytes.Equal(got, want) {
					t.Errorf("%s: encodes to\n%.300s\nwant, byte for byte,\n%.300s", when, got, want)
				}
			}
			check("as returned")
			res.SetMeta(mcpsdk.Meta{"io.modelcontextprotocol/serverInfo": map[string]string{"name": "lakegate"}})
			check("after SetMeta")
		})
	}
}

// textOnce must not be a json.Marshaler (encoding/json would scan what it
// returns), and encodes every field a CallToolResult has: a field go-sdk
// adds fails this until textOnce encodes it.
func TestTextOnceIsEncodedByItsFields(t *testing.T) {
	if _, ok := any(textOnce{}).(json.Marshaler); ok {
		t.Error("textOnce has a MarshalJSON")
	}
	var fields []string
	for f := range reflect.TypeFor[mcpsdk.CallToolResult]().Fields() {
		if f.IsExported() {
			fields = append(fields, f.Name)
		}
	}
	// InputRequests and RequestState: textOnce does not take such results.
	want := []string{"Meta", "Content", "StructuredContent", "IsError", "InputRequests", "RequestState"}
	if !slices.Equal(fields, want) {
		t.Errorf("CallToolResult's fields: %v, textOnce knows %v", fields, want)
	}
}

// Whatever the texts, a result encodes to go-sdk's JSON.
func FuzzEncodeTextOnce(f *testing.F) {
	f.Add("a,b\n1,2\n", "x")
	f.Add("<&>\u2028\xff\"\\", "\\u003c")
	f.Fuzz(func(t *testing.T, text, other string) {
		r := &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.TextContent{Text: text},
			&mcpsdk.TextContent{Text: other},
		}, StructuredContent: map[string]string{"other": other}}
		got, want := marshalAsJSONRPC(t, newTextOnce(r)), marshalAsJSONRPC(t, r)
		if !reflect.DeepEqual(decodedJSON(t, got), decodedJSON(t, want)) {
			t.Fatalf("encodes to\n%.300q\nwant\n%.300q", got, want)
		}
	})
}

// BenchmarkMarshalAnswer marshals an answer as a response holds it, as
// go-sdk does and with its text encoded once: one of 40,000 characters,
// and a point call's (one row, and its columns in structured content).
func BenchmarkMarshalAnswer(b *testing.B) {
	long := &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: rowsText(40000, "1042,7,2025-01-01 00:00:03+00,34.19,77.29,0.31,ok,\n")}},
		StructuredContent: json.RawMessage(`{"row_count":740,"truncated":true}`)}
	point := &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "id,device_id,ts,temperature,humidity,power_w,status,note\n4242,243,2025-01-01T03:32:06Z,18.98,34.18,315.02,ok,\n# rows: 1\n"}},
		StructuredContent: json.RawMessage(`{"as_of":"2026-11-27T06:46:37.810018Z","columns":[{"json":"number_or_string","name":"id","type":"int8"},{"json":"number","name":"device_id","type":"int4"},{"name":"ts","type":"timestamptz"},{"json":"number_or_string","name":"temperature","type":"float8"},{"json":"number_or_string","name":"humidity","type":"float8"},{"json":"number_or_string","name":"power_w","type":"numeric"},{"name":"status","type":"text"},{"name":"note","type":"text"}],"elapsed_ms":54,"lag_s":0,"mode":"inline","row_count":1,"sql":"SELECT * FROM readings WHERE id = $1","truncated":false}`)}
	for _, r := range []struct {
		name string
		r    *mcpsdk.CallToolResult
	}{{"long", long}, {"point", point}} {
		for _, c := range []struct {
			name string
			v    any
		}{{"sdk", r.r}, {"once", newTextOnce(r.r)}} {
			b.Run(r.name+"/"+c.name, func(b *testing.B) {
				b.SetBytes(int64(len(r.r.Content[0].(*mcpsdk.TextContent).Text)))
				b.ReportAllocs()
				for b.Loop() {
					marshalAsJSONRPC(b, c.v)
				}
			})
		}
	}
}

// Through a protocol server, in the revision where go-sdk sets a
// result's type and server info after the middleware has returned, a
// long answer is the JSON a server without EncodeTextOnce answers.
func TestEncodeTextOnceThroughTheServer(t *testing.T) {
	csv := rowsText(5000, "1042,7,2025-01-01 00:00:03+00,34.19,77.29,0.31,ok,\n")
	answer := func(middleware bool) any {
		s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil)
		mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "long"}, func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: csv}}}, map[string]int{"rows": 90}, nil
		})
		if middleware {
			s.AddReceivingMiddleware(EncodeTextOnce)
		}
		h := &statelessCalls{getServer: func(*http.Request) *mcpsdk.Server { return s }, next: http.NotFoundHandler()}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, callRequest(callBody("long", map[string]any{}, nil), "long", nil))
		data, ok := strings.CutPrefix(strings.TrimSpace(w.Body.String()), "event: message\ndata: ")
		if w.Code != http.StatusOK || !ok {
			t.Fatalf("got %d %.200q", w.Code, w.Body.String())
		}
		return decodedJSON(t, []byte(data))
	}
	got, want := answer(true), answer(false)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("answers\n%.400v\nwant\n%.400v", got, want)
	}
	if res := want.(map[string]any)["result"].(map[string]any); res["resultType"] != "complete" || res["_meta"] == nil {
		t.Errorf("the answer lacks what go-sdk sets late (resultType, _meta): %.200v", res)
	}
}
