package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"slices"
	"strconv"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool's answer is mostly one text: its rows as CSV, up to the answer's
// budget. go-sdk encodes that text, then scans it twice more: TextContent
// and CallToolResult each marshal through a MarshalJSON, and encoding/json
// compacts what a MarshalJSON returns, once for the result and once again
// for the response that holds it. The two scans cost three times what the
// encoding does (about 110 instructions a byte beside 17: a 40,000-character
// answer took 5.5 M instructions to marshal). EncodeTextOnce has go-sdk
// marshal the answer with each long text out of it, and puts the texts in,
// encoded once, in their places. The one scan left, the compaction of the
// whole response inside go-sdk's jsonrpc2 (NewResponse), cannot be reached
// from outside it.

// textOnceMin is the shortest text EncodeTextOnce takes out: below it the
// scans cost less than taking it out does.
const textOnceMin = 1024

// textMark starts the stand-in of a text taken out: unique to the process,
// so that no text or value a caller sends can name it.
var textMark = "lakegate-text-" + rand.Text() + "-"

// EncodeTextOnce is a receiving middleware: a tool's result with a long
// text marshals with the text encoded once. What it marshals to is what
// go-sdk marshals the result to, byte for byte.
func EncodeTextOnce(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcpsdk.CallToolResult); ok && err == nil && longText(r) {
			return textOnce{r}, nil
		}
		return res, err
	}
}

// longText reports whether r has a text EncodeTextOnce takes out.
func longText(r *mcpsdk.CallToolResult) bool {
	for _, c := range r.Content {
		if t, ok := c.(*mcpsdk.TextContent); ok && len(t.Text) >= textOnceMin {
			return true
		}
	}
	return false
}

// textOnce is a tool's result that marshals its long texts once. It is
// the result it holds for go-sdk (its _meta, its result type), which may
// change it until it is marshalled.
type textOnce struct{ *mcpsdk.CallToolResult }

func (t textOnce) MarshalJSON() ([]byte, error) {
	r := *t.CallToolResult
	r.Content = slices.Clone(r.Content)
	var texts []string
	for i, c := range r.Content {
		tc, ok := c.(*mcpsdk.TextContent)
		if !ok || len(tc.Text) < textOnceMin {
			continue
		}
		stand := *tc
		stand.Text = textMark + strconv.Itoa(len(texts))
		r.Content[i] = &stand
		texts = append(texts, tc.Text)
	}
	rest, err := r.MarshalJSON()
	if err != nil {
		return nil, err
	}
	size := len(rest)
	for _, text := range texts {
		size += len(text) + len(text)/16 + 2
	}
	out := bytes.NewBuffer(make([]byte, 0, size))
	enc := json.NewEncoder(out) // escapes HTML, as TextContent's json.Marshal does
	for i, text := range texts {
		stand := `"` + textMark + strconv.Itoa(i) + `"`
		at := bytes.Index(rest, []byte(stand))
		if at < 0 {
			return t.CallToolResult.MarshalJSON() // go-sdk wrote a text as it does not today
		}
		out.Write(rest[:at])
		if err := enc.Encode(text); err != nil {
			return nil, err
		}
		out.Truncate(out.Len() - 1) // Encode's newline
		rest = rest[at+len(stand):]
	}
	out.Write(rest)
	return out.Bytes(), nil
}
