package transport

import (
	"context"
	"encoding/json"
	"errors"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool's answer is mostly one text: its rows as CSV, up to the answer's
// budget. go-sdk escapes that text, then scans it twice more:
// TextContent and CallToolResult each marshal through a MarshalJSON, and
// encoding/json compacts what a MarshalJSON returns, once as the result
// takes in the content, once as go-sdk's jsonrpc2 takes in the result.
// The two scans cost several times what the escaping does (a 40,000-character
// answer took 6.2 M instructions to marshal, 0.8 M of them escaping).
//
// EncodeTextOnce hands go-sdk the result as a value with no MarshalJSON,
// which encoding/json encodes field by field as jsonrpc2 marshals the
// response: a plain text is escaped straight into the response, and
// nothing scans it again. What it encodes to is what go-sdk's result
// encodes to, key for key, but for HTML's three characters (<, >, &),
// which go-sdk's TextContent escapes as \u003c and this leaves as they are:
// the same JSON strings.

// EncodeTextOnce is a receiving middleware: a tool's result with a plain
// text is encoded with the text escaped once. A short answer gains too:
// a point call's (120 bytes of text, 600 of structured content) takes
// 51 K instructions and 1.2 KB to marshal where go-sdk's took 113 K and
// 2.0 KB (BenchmarkMarshalAnswer under callgrind).
func EncodeTextOnce(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcpsdk.CallToolResult); ok && err == nil && takesTextOnce(r) {
			return newTextOnce(r), nil
		}
		return res, err
	}
}

// takesTextOnce reports whether r has a plain text, and nothing textOnce
// does not encode (a result asking for input: its requests and state).
func takesTextOnce(r *mcpsdk.CallToolResult) bool {
	if r.InputRequests != nil || r.RequestState != "" {
		return false
	}
	for _, c := range r.Content {
		if _, ok := plainText(c); ok {
			return true
		}
	}
	return false
}

// plainText is c as a text with no _meta or annotations.
func plainText(c mcpsdk.Content) (*mcpsdk.TextContent, bool) {
	t, ok := c.(*mcpsdk.TextContent)
	return t, ok && t.Meta == nil && t.Annotations == nil
}

// textOnce is a tool's result encoded by its fields. It holds the
// CallToolResult for go-sdk, which may still set its _meta (its server's
// info) and its result type once the middleware has returned: those two
// are read as the result is encoded. The rest cannot change by then.
type textOnce struct {
	*mcpsdk.CallToolResult `json:"-"`
	// hideMarshalJSON hides CallToolResult's MarshalJSON: of two
	// embedded fields with a method of one name at one depth, neither
	// method is promoted. So textOnce has no MarshalJSON, and
	// encoding/json encodes its fields, not what a MarshalJSON returns
	// (which it would scan once more).
	//lint:ignore U1000 used by the compiler's method promotion, not by a selector
	hideMarshalJSON `json:"-"`

	// The keys of a CallToolResult, in go-sdk's order.
	WireMeta              metaOf       `json:"_meta,omitzero"`
	WireContent           []any        `json:"content"`
	WireStructuredContent any          `json:"structuredContent,omitempty"`
	WireIsError           bool         `json:"isError,omitempty"`
	WireResultType        resultTypeOf `json:"resultType,omitzero"`
}

//lint:ignore U1000 see textOnce
type hideMarshalJSON struct{}

// MarshalJSON is never called: it only hides CallToolResult's.
//
//lint:ignore U1000 see textOnce
func (hideMarshalJSON) MarshalJSON() ([]byte, error) {
	return nil, errors.New("transport: a tool result was encoded through hideMarshalJSON, which only hides a method")
}

// textWire is a plain text as go-sdk's TextContent encodes it.
type textWire struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func newTextOnce(r *mcpsdk.CallToolResult) textOnce {
	content := make([]any, len(r.Content))
	for i, c := range r.Content {
		content[i] = c // go-sdk encodes what is not a plain text
		if t, ok := plainText(c); ok {
			content[i] = textWire{Type: "text", Text: t.Text}
		}
	}
	return textOnce{CallToolResult: r, WireMeta: metaOf{r}, WireContent: content,
		WireStructuredContent: r.StructuredContent, WireIsError: r.IsError, WireResultType: resultTypeOf{r}}
}

// metaOf encodes a result's _meta as it is when the result is encoded.
type metaOf struct{ r *mcpsdk.CallToolResult }

func (m metaOf) IsZero() bool                 { return len(m.r.Meta) == 0 }
func (m metaOf) MarshalJSON() ([]byte, error) { return json.Marshal(map[string]any(m.r.Meta)) }

// resultTypeOf encodes a result's type as it is when the result is
// encoded. go-sdk keeps it unexported, so it is read from go-sdk's
// encoding of the result with nothing else in it.
type resultTypeOf struct{ r *mcpsdk.CallToolResult }

func (t resultTypeOf) get() (string, error) {
	bare := *t.r
	bare.Meta, bare.Content, bare.StructuredContent = nil, nil, nil
	b, err := bare.MarshalJSON()
	if err != nil {
		return "", err
	}
	var wire struct {
		ResultType string `json:"resultType"`
	}
	err = json.Unmarshal(b, &wire)
	return wire.ResultType, err
}

func (t resultTypeOf) IsZero() bool {
	v, err := t.get()
	return v == "" && err == nil // an error is reported by MarshalJSON
}

func (t resultTypeOf) MarshalJSON() ([]byte, error) {
	v, err := t.get()
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
