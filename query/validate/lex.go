package validate

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// kind is the class of a lexical token.
type kind uint8

const (
	kIdent  kind = iota // unquoted word; val is lower-cased, as PostgreSQL folds it
	kQIdent             // "quoted identifier"; val is the name with "" undoubled
	kString             // any string constant: '...', E'...', B'...', X'...', N'...', U&'...', $tag$...$tag$
	kNumber             // numeric constant
	kParam              // $1, $2, ...
	kOp                 // operator: + - * / < > = ~ ! @ # % ^ & | ` ? and runs of them
	kPunct              // ( ) [ ] , ; . : ::
)

// token is one lexical token of the input. pos and end are byte offsets.
type token struct {
	kind     kind
	pos, end int
	val      string
}

// isSpace reports PostgreSQL's white space: space, \t, \n, \r, \f, \v.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isIdentCont(c byte) bool {
	return isIdentStart(c) || isDigit(c) || c == '$'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isOpChar reports the characters PostgreSQL builds operators from.
func isOpChar(c byte) bool {
	return strings.IndexByte("+-*/<>=~!@#%^&|`?", c) >= 0
}

// lexer turns PostgreSQL text into tokens, dropping white space and comments.
// It follows PostgreSQL's scan.l where it matters for deciding where strings,
// identifiers, comments and statements begin and end, and refuses what it is
// not sure of rather than guessing.
type lexer struct {
	src  string
	toks []token
}

// lex splits src into tokens or explains why it cannot.
func lex(src string) ([]token, *Error) {
	lx := &lexer{src: src, toks: make([]token, 0, len(src)/3+4)}
	if err := lx.run(); err != nil {
		return nil, err
	}
	return lx.toks, nil
}

func (lx *lexer) emit(k kind, pos, end int, val string) {
	lx.toks = append(lx.toks, token{kind: k, pos: pos, end: end, val: val})
}

func (lx *lexer) run() *Error {
	src := lx.src
	n := len(src)
	for i := 0; i < n; {
		c := src[i]
		var next byte
		if i+1 < n {
			next = src[i+1]
		}
		switch {
		case isSpace(c):
			i++
		case c == '-' && next == '-':
			i = lineCommentEnd(src, i)
		case c == '/' && next == '*':
			end, err := lx.blockComment(i)
			if err != nil {
				return err
			}
			i = end
		case c == '\'':
			end, err := lx.plainString(i, i)
			if err != nil {
				return err
			}
			i = end
		case (c == 'E' || c == 'e') && next == '\'':
			end, err := lx.escapeString(i)
			if err != nil {
				return err
			}
			i = end
		case strings.IndexByte("NnBbXx", c) >= 0 && next == '\'':
			end, err := lx.plainString(i, i+1)
			if err != nil {
				return err
			}
			i = end
		case (c == 'U' || c == 'u') && next == '&' && i+2 < n && src[i+2] == '\'':
			end, err := lx.plainString(i, i+2)
			if err != nil {
				return err
			}
			i = end
		case (c == 'U' || c == 'u') && next == '&' && i+2 < n && src[i+2] == '"':
			return newError(src, i, `Unicode-escaped identifiers (U&"...") are not accepted`,
				`write the name plainly, in double quotes if needed: "name"`)
		case c == '"':
			end, err := lx.quotedIdent(i)
			if err != nil {
				return err
			}
			i = end
		case c == '$':
			end, err := lx.dollar(i)
			if err != nil {
				return err
			}
			i = end
		case isIdentStart(c):
			j := i + 1
			for j < n && isIdentCont(src[j]) {
				j++
			}
			lx.emit(kIdent, i, j, lower(src[i:j]))
			i = j
		case isDigit(c) || c == '.' && isDigit(next):
			end, err := lx.number(i)
			if err != nil {
				return err
			}
			i = end
		case isOpChar(c):
			i = lx.operator(i)
		case c == ':' && next == ':':
			lx.emit(kPunct, i, i+2, "::")
			i += 2
		case strings.IndexByte("()[],;.:", c) >= 0:
			lx.emit(kPunct, i, i+1, src[i:i+1])
			i++
		case c >= utf8.RuneSelf:
			r, _ := utf8.DecodeRuneInString(src[i:])
			return newError(src, i,
				fmt.Sprintf("non-ASCII character %U %q outside a string or quoted identifier is not accepted (look-alike letters and punctuation change what a statement means)", r, r),
				"write keywords, names and punctuation in ASCII; put other text in 'string literals' or \"quoted identifiers\"")
		default:
			return newError(src, i, fmt.Sprintf("unexpected character %q", c),
				"lakegate accepts PostgreSQL SELECT syntax")
		}
	}
	return nil
}

// lineCommentEnd returns the end of a -- comment starting at i.
func lineCommentEnd(src string, i int) int {
	for i < len(src) && src[i] != '\n' && src[i] != '\r' {
		i++
	}
	return i
}

// blockComment skips a /* */ comment starting at i. PostgreSQL nests them.
func (lx *lexer) blockComment(start int) (int, *Error) {
	src := lx.src
	depth := 0
	for i := start; i+1 < len(src); {
		switch {
		case src[i] == '/' && src[i+1] == '*':
			depth++
			i += 2
		case src[i] == '*' && src[i+1] == '/':
			depth--
			i += 2
			if depth == 0 {
				return i, nil
			}
		default:
			i++
		}
	}
	return 0, newError(src, start, "unterminated comment: /* is never closed by */ (PostgreSQL nests /* */ comments)",
		"close every /* with */")
}

// standardEnd returns the end of a '...' string whose opening quote is at q,
// reading it as PostgreSQL does with standard_conforming_strings on: only ”
// escapes a quote. It returns -1 if the string is not terminated.
func standardEnd(src string, q int) int {
	for j := q + 1; j < len(src); j++ {
		if src[j] == '\'' {
			if j+1 < len(src) && src[j+1] == '\'' {
				j++
				continue
			}
			return j + 1
		}
	}
	return -1
}

// escapeEnd is standardEnd for E'...' strings, where a backslash also
// escapes the next character.
func escapeEnd(src string, q int) int {
	for j := q + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '\'':
			if j+1 < len(src) && src[j+1] == '\'' {
				j++
				continue
			}
			return j + 1
		}
	}
	return -1
}

func (lx *lexer) unterminatedString(pos int) *Error {
	return newError(lx.src, pos, "unterminated string constant: the quote is never closed",
		"close every string with ' (write a quote inside a string as '')")
}

// plainString reads a string without backslash escapes: '...', N'...',
// B'...', X'...' or U&'...' starting at pos, with its opening quote at q.
// Whether a backslash escapes the next character depends on the server
// setting standard_conforming_strings (B'0”\'... continues as a plain
// string after ”), so a string whose end differs between the two readings
// is refused: one reading could hide a second statement or a table from the
// other.
func (lx *lexer) plainString(pos, q int) (int, *Error) {
	end := standardEnd(lx.src, q)
	if end < 0 {
		return 0, lx.unterminatedString(pos)
	}
	if strings.IndexByte(lx.src[q:end], '\\') >= 0 && escapeEnd(lx.src, q) != end {
		return 0, newError(lx.src, pos,
			`string constant with a backslash before a quote is ambiguous: where it ends depends on standard_conforming_strings`,
			`write E'...' and escape backslashes as \\ and quotes as \' or '', or avoid the backslash`)
	}
	lx.emit(kString, pos, end, "")
	return end, nil
}

// escapeString reads E'...' starting at pos.
func (lx *lexer) escapeString(pos int) (int, *Error) {
	end := escapeEnd(lx.src, pos+1)
	if end < 0 {
		return 0, lx.unterminatedString(pos)
	}
	lx.emit(kString, pos, end, "")
	return end, nil
}

// quotedIdent reads "name" starting at pos; "" stands for one ".
func (lx *lexer) quotedIdent(pos int) (int, *Error) {
	src := lx.src
	for j := pos + 1; j < len(src); j++ {
		if src[j] != '"' {
			continue
		}
		if j+1 < len(src) && src[j+1] == '"' {
			j++
			continue
		}
		name := src[pos+1 : j]
		if strings.Contains(name, `""`) {
			name = strings.ReplaceAll(name, `""`, `"`)
		}
		lx.emit(kQIdent, pos, j+1, name)
		return j + 1, nil
	}
	return 0, newError(src, pos, `unterminated quoted identifier: the " is never closed`,
		`close every quoted identifier with " (write a quote inside it as "")`)
}

// dollar reads a parameter ($1) or a dollar-quoted string ($$...$$,
// $tag$...$tag$) starting at pos.
func (lx *lexer) dollar(pos int) (int, *Error) {
	src := lx.src
	j := pos + 1
	if j < len(src) && isDigit(src[j]) {
		for j < len(src) && isDigit(src[j]) {
			j++
		}
		if j < len(src) && isIdentCont(src[j]) {
			return 0, newError(src, pos, "a parameter like $1 must not be followed directly by letters or digits",
				"separate the parameter from what follows with a space")
		}
		lx.emit(kParam, pos, j, src[pos+1:j])
		return j, nil
	}
	if j < len(src) && isIdentStart(src[j]) {
		for j < len(src) && isIdentCont(src[j]) && src[j] != '$' {
			j++
		}
	}
	if j >= len(src) || src[j] != '$' {
		return 0, newError(src, pos, `unexpected "$": it is neither a parameter ($1) nor the start of a dollar-quoted string ($$...$$ or $tag$...$tag$)`,
			"use $1, $2, ... for parameters and $$...$$ for dollar-quoted strings")
	}
	delim := src[pos : j+1]
	k := strings.Index(src[j+1:], delim)
	if k < 0 {
		return 0, newError(src, pos, fmt.Sprintf("unterminated dollar-quoted string: %s is never closed", delim),
			fmt.Sprintf("close the string with %s", delim))
	}
	end := j + 1 + k + len(delim)
	lx.emit(kString, pos, end, "")
	return end, nil
}

// number reads a numeric constant: 12, 1_000, 1.5, .5, 1e-3, 0x1F, 0o17, 0b101.
// A number followed directly by a letter is refused: PostgreSQL 15 and later
// reject it and older versions split it (1into is 1 INTO).
func (lx *lexer) number(pos int) (int, *Error) {
	src := lx.src
	j := pos
	digits := func(ok func(byte) bool) {
		for j < len(src) && (ok(src[j]) || src[j] == '_' && j+1 < len(src) && ok(src[j+1])) {
			j++
		}
	}
	if src[j] == '0' && j+2 < len(src) && strings.IndexByte("xXoObB", src[j+1]) >= 0 && isBaseDigit(src[j+1], src[j+2]) {
		base := src[j+1]
		j += 2
		digits(func(c byte) bool { return isBaseDigit(base, c) })
	} else {
		digits(isDigit)
		if j < len(src) && src[j] == '.' && !(j+1 < len(src) && src[j+1] == '.') {
			j++
			digits(isDigit)
		}
		if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
			k := j + 1
			if k < len(src) && (src[k] == '+' || src[k] == '-') {
				k++
			}
			if k < len(src) && isDigit(src[k]) {
				j = k
				digits(isDigit)
			}
		}
	}
	if j < len(src) && isIdentCont(src[j]) {
		return 0, newError(src, pos, fmt.Sprintf("number %q is followed directly by %q", src[pos:j], src[j]),
			"put a space between a number and the word after it")
	}
	lx.emit(kNumber, pos, j, src[pos:j])
	return j, nil
}

func isBaseDigit(base, c byte) bool {
	switch base {
	case 'x', 'X':
		return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
	case 'o', 'O':
		return c >= '0' && c <= '7'
	default:
		return c == '0' || c == '1'
	}
}

// operator reads an operator starting at pos, as PostgreSQL does: a run of
// operator characters that stops before a comment start (-- or /*), and that
// loses trailing + and - unless it contains one of ~ ! @ # % ^ & | ` ?.
func (lx *lexer) operator(pos int) int {
	src := lx.src
	j := pos
	for j < len(src) && isOpChar(src[j]) {
		if j > pos && j+1 < len(src) && (src[j] == '-' && src[j+1] == '-' || src[j] == '/' && src[j+1] == '*') {
			break
		}
		j++
	}
	end := j
	if j-pos > 1 && (src[j-1] == '+' || src[j-1] == '-') &&
		!strings.ContainsAny(src[pos:j], "~!@#%^&|`?") {
		for j-pos > 1 && (src[j-1] == '+' || src[j-1] == '-') {
			j--
		}
	}
	lx.emit(kOp, pos, j, src[pos:j])
	// The trimmed tail is + and - only, with no "--" in it: PostgreSQL reads
	// it as one-character operators. Emitting them here keeps lexing linear.
	for ; j < end; j++ {
		lx.emit(kOp, j, j+1, src[j:j+1])
	}
	return end
}

// lower lower-cases an ASCII word without allocating when it is already.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// HasOrderBy reports whether sql has an ORDER BY outside string constants
// and comments, at any depth: a hint's check (are the pages of this
// statement's result in a stable order?), not a parse. Text that does not
// lex has none.
func HasOrderBy(sql string) bool {
	toks, err := lex(sql)
	if err != nil {
		return false
	}
	for i := 0; i+1 < len(toks); i++ {
		if toks[i].kind == kIdent && toks[i].val == "order" && toks[i+1].kind == kIdent && toks[i+1].val == "by" {
			return true
		}
	}
	return false
}
