package validate

import (
	"strings"
	"testing"
)

// refItem is one significant piece of SQL found by refScan.
type refItem struct {
	word   string // a name, lower-cased unless quoted; "" for other items
	punct  byte   // ';', '(' or another single character; 0 for words and strings
	quoted bool   // word was a "quoted identifier"
}

// mutating are keywords that must never reach PostgreSQL as keywords in an
// accepted statement: they write data (also inside WITH) or create a table.
var mutating = map[string]bool{"insert": true, "update": true, "delete": true, "merge": true, "into": true}

// refScan is an independent reading of PostgreSQL's lexical structure, kept
// deliberately naive and separate from lex.go, as an oracle for FuzzCheck. It
// walks the text one character at a time, skips white space, comments,
// strings and dollar-quoted strings, and reports words (with quoted
// identifiers as words) and single punctuation characters. Plain '...'
// strings are read with standard_conforming_strings on.
func refScan(s string) []refItem {
	var items []refItem
	isWord := func(c byte) bool {
		return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
	}
	i := 0
	skipQuoted := func(q byte, backslash bool) { // i is at the opening quote
		for i++; i < len(s); i++ {
			if backslash && s[i] == '\\' {
				i++
				continue
			}
			if s[i] == q {
				if i+1 < len(s) && s[i+1] == q {
					i++
					continue
				}
				i++
				return
			}
		}
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(s[i:], "--"):
			for i < len(s) && s[i] != '\n' && s[i] != '\r' {
				i++
			}
		case strings.HasPrefix(s[i:], "/*"):
			depth := 0
			for i < len(s) {
				if strings.HasPrefix(s[i:], "/*") {
					depth++
					i += 2
				} else if strings.HasPrefix(s[i:], "*/") {
					depth--
					i += 2
					if depth == 0 {
						break
					}
				} else {
					i++
				}
			}
		case c == '\'':
			skipQuoted('\'', false)
			items = append(items, refItem{})
		case c == '"':
			start := i
			skipQuoted('"', false)
			name := strings.TrimSuffix(s[start+1:i], `"`)
			items = append(items, refItem{word: strings.ReplaceAll(name, `""`, `"`), quoted: true})
		case c == '$' && i+1 < len(s) && !(s[i+1] >= '0' && s[i+1] <= '9'):
			end := strings.IndexByte(s[i+1:], '$')
			tag := ""
			if end >= 0 {
				tag = s[i : i+1+end+1]
			}
			if end < 0 || strings.ContainsAny(tag, " \t\n\r;()'\"") {
				items = append(items, refItem{punct: '$'})
				i++
				continue
			}
			close := strings.Index(s[i+len(tag):], tag)
			if close < 0 {
				i = len(s)
			} else {
				i += len(tag) + close + len(tag)
			}
			items = append(items, refItem{})
		case isWord(c):
			start := i
			for i < len(s) && isWord(s[i]) {
				i++
			}
			w := strings.ToLower(s[start:i])
			if i < len(s) && s[i] == '\'' && (w == "e" || w == "b" || w == "x" || w == "n") {
				skipQuoted('\'', w == "e")
				items = append(items, refItem{})
				continue
			}
			items = append(items, refItem{word: w})
		default:
			items = append(items, refItem{punct: c})
			i++
		}
	}
	return items
}

func FuzzCheck(f *testing.F) {
	for _, e := range readHostile(f) {
		f.Add(e.sql)
	}
	for _, e := range generatedHostile() {
		if len(e.sql) < 1000 {
			f.Add(e.sql)
		}
	}
	for _, tc := range acceptedCases {
		f.Add(tc.sql)
	}
	f.Add(benchSQL)
	allow := &Options{AllowTable: func(TableRef) bool { return true }}
	f.Fuzz(func(t *testing.T, sql string) {
		st, err := Check(sql, nil)
		stAllow, errAllow := Check(sql, allow)
		if (err == nil) != (st != nil) {
			t.Fatalf("got statement %v and error %v, want exactly one", st, err)
		}
		if errAllow == nil && !stAllow.Parsed {
			t.Fatalf("allow-list accepted an unparsed statement")
		}
		if errAllow == nil && err != nil {
			t.Fatalf("accepted with an allow-list but refused without: %v", err)
		}
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Reason == "" || e.Hint == "" || e.Pos >= 0 && e.Line < 1 {
				t.Fatalf("got %#v, want an *Error with reason, hint and position", err)
			}
			return
		}
		if len(sql) > maxLen || strings.IndexByte(sql, 0) >= 0 {
			t.Fatalf("accepted input of %d bytes or with a NUL byte", len(sql))
		}
		items := refScan(sql)
		for i, it := range items {
			if it.punct == ';' && i != len(items)-1 {
				t.Fatalf("accepted %q, but the reference scan finds a statement after \";\" (item %d of %d)", sql, i, len(items))
			}
			if it.word != "" && i+1 < len(items) && items[i+1].punct == '(' && isKnownRefused(it.word) {
				t.Fatalf("accepted %q, but it calls refused function %s", sql, it.word)
			}
			if it.word != "" && i+1 < len(items) && items[i+1].punct == '(' && isServerInfoFunc(it.word) {
				t.Fatalf("accepted %q, but it calls server-information function %s", sql, it.word)
			}
			if it.word != "" && i > 0 && items[i-1].punct == '.' && isFieldCall(it.word) {
				t.Fatalf("accepted %q, but .%s calls a refused function by field selection", sql, it.word)
			}
			if !it.quoted && mutating[it.word] {
				prevDot := i > 0 && items[i-1].punct == '.'
				nextDot := i+1 < len(items) && items[i+1].punct == '.'
				prevAs := i > 0 && !items[i-1].quoted && items[i-1].word == "as"
				if !prevDot && !nextDot && !prevAs {
					t.Fatalf("accepted %q, but it holds the keyword %s", sql, it.word)
				}
			}
		}
	})
}
