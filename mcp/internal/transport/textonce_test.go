package transport

import (
	"bytes"
	"context"
	"encoding/json"
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

// A result with long texts marshals, through EncodeTextOnce, to the bytes
// go-sdk marshals it to: texts of every kind of character, several texts
// among other content, _meta and structured content (which may hold the
// text too), an error result; a result with no long text is left as it is.
func TestEncodeTextOnceAsTheSDK(t *testing.T) {
	long := rowsText(3000, "1042,7,2025-01-01 00:00:03+00,34.19,\"a <b> & \"\"c\"\"\"\n")
	odd := long + "\u2028\u2029\x00\x1f\t\r\n\b\f\\\"</script>\xff\xfe é 漢字 😀" + textMark + "0"
	size := int64(9)
	results := map[string]*mcpsdk.CallToolResult{
		"rows":       {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: long}}, StructuredContent: json.RawMessage(`{"row_count":3,"columns":[{"name":"id"}]}`)},
		"characters": {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: odd}}},
		"several": {Content: []mcpsdk.Content{
			&mcpsdk.TextContent{Text: long, Annotations: &mcpsdk.Annotations{Priority: 0.5}},
			&mcpsdk.TextContent{Text: "short"},
			&mcpsdk.ResourceLink{URI: "lakegate://blocks/x/0", Name: "block-0", Size: &size},
			&mcpsdk.TextContent{Text: odd, Meta: mcpsdk.Meta{"k": "v"}},
		}, Meta: mcpsdk.Meta{"io.modelcontextprotocol/related-task": map[string]any{"taskId": "t1"}}},
		"structured holds the text": {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: long}}, StructuredContent: map[string]any{"text": long, "n": 1}},
		"error":                     {Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: long}}, IsError: true},
		"empty text":                {Content: []mcpsdk.Content{&mcpsdk.TextContent{}}},
	}
	for name, r := range results {
		t.Run(name, func(t *testing.T) {
			want := marshalAsJSONRPC(t, r)
			res, err := EncodeTextOnce(func(context.Context, string, mcpsdk.Request) (mcpsdk.Result, error) {
				return r, nil
			})(t.Context(), "tools/call", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, wrapped := res.(textOnce); wrapped != longText(r) {
				t.Errorf("wrapped: %v, want %v", wrapped, longText(r))
			}
			if got := marshalAsJSONRPC(t, res); !bytes.Equal(got, want) {
				t.Errorf("marshals to\n%.300s\nwant\n%.300s", got, want)
			}
			// What go-sdk does to a result after the middleware reaches it.
			res.SetMeta(mcpsdk.Meta{"io.modelcontextprotocol/serverInfo": map[string]string{"name": "lakegate"}})
			if got, want := marshalAsJSONRPC(t, res), marshalAsJSONRPC(t, r); !bytes.Equal(got, want) {
				t.Errorf("after SetMeta: marshals to\n%.300s\nwant\n%.300s", got, want)
			}
		})
	}
}

// Whatever the text, a result marshals as go-sdk marshals it.
func FuzzEncodeTextOnce(f *testing.F) {
	f.Add("a,b\n1,2\n", "x")
	f.Add("<&>\u2028\xff\"\\", textMark+"0")
	f.Fuzz(func(t *testing.T, text, other string) {
		r := &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.TextContent{Text: strings.Repeat(text, textOnceMin/max(len(text), 1)+1)},
			&mcpsdk.TextContent{Text: other},
		}, StructuredContent: map[string]string{"other": other}}
		if got, want := marshalAsJSONRPC(t, textOnce{r}), marshalAsJSONRPC(t, r); !bytes.Equal(got, want) {
			t.Fatalf("marshals to\n%.300q\nwant\n%.300q", got, want)
		}
	})
}

// BenchmarkMarshalAnswer marshals a 40,000-character answer as a response
// holds it: as go-sdk does, and with its text encoded once.
func BenchmarkMarshalAnswer(b *testing.B) {
	r := &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: rowsText(40000, "1042,7,2025-01-01 00:00:03+00,34.19,77.29,0.31,ok,\n")}},
		StructuredContent: json.RawMessage(`{"row_count":740,"truncated":true}`)}
	for _, c := range []struct {
		name string
		v    any
	}{{"sdk", r}, {"once", textOnce{r}}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(r.Content[0].(*mcpsdk.TextContent).Text)))
			b.ReportAllocs()
			for b.Loop() {
				marshalAsJSONRPC(b, c.v)
			}
		})
	}
}
