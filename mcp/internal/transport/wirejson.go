package transport

import (
	"bytes"
	"encoding/json"
	"fmt"

	segjson "github.com/segmentio/encoding/json"
)

// The transports read each message's envelope (and a stateless call's
// name and revision) before the SDK does. They read it as the SDK's own
// decoder will, segmentio's with keys matched exactly, so that what is
// checked here is what the SDK then acts on; and they read it in place,
// into structs, where encoding/json into a map of raw values cost a
// point call about a tenth of its instructions.

// wireMessage is a JSON-RPC message's envelope, its values as sent.
type wireMessage struct {
	Version string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"` // present, even null: a request
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// maxDepth bounds the nesting of a message read here, as the SDK bounds
// its own (segmentio's parser descends recursively).
const maxDepth = 1000

// parseExact decodes data, one JSON value and nothing after it, into v (a
// pointer), keys matching exactly.
func parseExact(data []byte, v any) error {
	if err := checkDepth(data); err != nil {
		return err
	}
	rest, err := segjson.Parse(data, v, segjson.DontMatchCaseInsensitiveStructFields)
	if err != nil {
		return err
	}
	if rest = bytes.TrimSpace(rest); len(rest) > 0 {
		return fmt.Errorf("invalid character %q after top-level value", rest[0])
	}
	return nil
}

// checkDepth refuses JSON whose objects and arrays nest past maxDepth,
// in one pass that skips strings.
func checkDepth(data []byte) error {
	depth, inString := 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > maxDepth {
				return fmt.Errorf("JSON nests deeper than %d", maxDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}
