package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	segjson "github.com/segmentio/encoding/json"
)

// The plugin reads what it checks of a message before go-sdk does (a
// message's envelope, a stateless call's name and revision, a tool's
// arguments) with segmentio's decoder, the one go-sdk decodes with, so
// that both read the same JSON the same way; and it reads in place, into
// structs where it can: encoding/json into maps of raw values cost a
// stateless point call about a tenth of its instructions.

// Message is a JSON-RPC message's envelope, its values as sent.
type Message struct {
	Version string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"` // present, even null: a request
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// Parse flags.
const (
	// Exact matches keys exactly, as go-sdk does; without it a key
	// matches a field whatever its case, as in encoding/json.
	Exact = segjson.DontMatchCaseInsensitiveStructFields
	// Numbers decodes a number into an any as a json.Number.
	Numbers = segjson.UseNumber
)

// MaxDepth bounds the nesting of what Parse reads, as go-sdk bounds its
// own: segmentio's parser descends recursively.
const MaxDepth = 1000

// Parse decodes data, one JSON value and nothing after it, into v (a
// pointer), as flags say.
func Parse(data []byte, v any, flags segjson.ParseFlags) error {
	if err := checkDepth(data); err != nil {
		return err
	}
	rest, err := segjson.Parse(data, v, flags)
	if err != nil {
		return err
	}
	if rest = bytes.TrimSpace(rest); len(rest) > 0 {
		return fmt.Errorf("invalid character %q after top-level value", rest[0])
	}
	return nil
}

// checkDepth refuses JSON whose objects and arrays nest past MaxDepth, in
// one pass that skips strings.
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
			if depth++; depth > MaxDepth {
				return fmt.Errorf("JSON nests deeper than %d", MaxDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}
