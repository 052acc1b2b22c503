package server

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// encoding/json turns a string that is not valid UTF-8 text into U+FFFD
// replacement characters without a word: a byte that is not UTF-8, or a
// \uD800-\uDFFF escape that is not half of a surrogate pair. Ingest refuses
// such strings instead of storing what the client did not send. The check
// costs one utf8.Valid and one scan for backslashes over the raw body; only
// a body that fails it is searched, row by row, for the string to name.

// invalidJSONText reports whether the raw JSON text data may hold a string
// that is not valid text: it is not all UTF-8, or it holds a \u escape of
// a lone surrogate. Backslashes are taken in pairs, so an escaped
// backslash followed by "ud800" is text, not an escape. False means no
// string in data needs a closer look.
func invalidJSONText(data []byte) bool {
	if !utf8.Valid(data) {
		return true
	}
	for {
		i := bytes.IndexByte(data, '\\')
		if i < 0 || i+1 >= len(data) {
			return false
		}
		if data[i+1] != 'u' {
			data = data[i+2:]
			continue
		}
		n, ok := escapeLen(data[i:])
		if !ok {
			return true
		}
		data = data[i+n:]
	}
}

// escapeLen reads the \uXXXX escape at the start of b (and, for a high
// surrogate, the low surrogate escape that must follow) and returns its
// length in bytes, and false when it encodes a lone surrogate. A truncated
// escape (which encoding/json refuses anyway) counts as one.
func escapeLen(b []byte) (int, bool) {
	r, ok := hex4(b, 2)
	if !ok {
		return 2, false
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 6, false
	case r >= 0xD800 && r < 0xDC00:
		if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if lo, ok := hex4(b, 8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				return 12, true
			}
		}
		return 6, false
	}
	return 6, true
}

// hex4 reads the four hexadecimal digits of b at i.
func hex4(b []byte, i int) (rune, bool) {
	if len(b) < i+4 {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// validText reports whether lit, the raw content of a JSON string literal
// (between its quotes), is valid text: UTF-8, and no \u escape of a lone
// surrogate.
func validText(lit []byte) bool {
	for len(lit) > 0 {
		i := bytes.IndexByte(lit, '\\')
		if i < 0 {
			return utf8.Valid(lit)
		}
		if !utf8.Valid(lit[:i]) {
			return false
		}
		lit = lit[i:]
		if len(lit) < 2 || lit[1] != 'u' {
			lit = lit[min(2, len(lit)):]
			continue
		}
		n, ok := escapeLen(lit)
		if !ok {
			return false
		}
		lit = lit[n:]
	}
	return true
}

// invalidRowText finds the first string of one row that is not valid text.
// raw holds the row as encoding/json accepted it, possibly after a comma
// and white space. It returns the top-level key the string belongs to
// (decoded), or the key itself when it is the bad string (as sent, escapes
// and all, so that %q shows the bad bytes), whether it is the key, and
// whether one was found.
func invalidRowText(raw []byte) (key string, isKey, found bool) {
	depth := 0
	expectKey := false
	var keyLit []byte
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '{':
			depth++
			expectKey = depth == 1
		case '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		case ':':
			if depth == 1 {
				expectKey = false
			}
		case '"':
			end := stringEnd(raw, i)
			lit := raw[i+1 : end]
			if depth == 1 && expectKey {
				keyLit = raw[i:min(end+1, len(raw))]
			}
			if !validText(lit) {
				if depth == 1 && expectKey {
					return string(lit), true, true
				}
				return decodeKey(keyLit), false, true
			}
			i = end
		}
	}
	return "", false, false
}

// stringEnd returns the index of the quote closing the string literal whose
// opening quote is at raw[start], or len(raw) if there is none.
func stringEnd(raw []byte, start int) int {
	for j := start + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(raw)
}

// decodeKey decodes a quoted key literal, valid text, for a message.
func decodeKey(quoted []byte) string {
	var s string
	_ = json.Unmarshal(quoted, &s)
	return s
}
