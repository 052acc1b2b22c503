// Package validate decides whether caller-written SQL may run: one read-only
// SELECT (or UNION), only functions on an allow list, only allowed tables.
//
// It imports nothing of lakegate's. Its parser (xwb1989/sqlparser) is MySQL
// dialect, so its output is only ever inspected, never sent to a database.
//
// Check applies two layers. A PostgreSQL-aware tokenizer is authoritative for
// the statement's shape: exactly one statement starting with SELECT, WITH,
// VALUES, TABLE or "(", no data-modifying or session keywords, no locking
// clauses, no system catalogs, ASCII outside strings, bounded size and
// nesting, and no call of a function off the allow list. Functions are
// allowed, not denied, because a deny list always misses one: lakegate's
// list (functions.go) holds pure computations (math, string, pattern,
// date/time, formatting, aggregates, window, JSON, arrays, ranges,
// geometric, text search, casts) for PostgreSQL and SQLite; an operator
// adds more with Options.AllowFunction (the allowed_functions setting).
// A call is judged wherever it appears (select list, FROM, WHERE, JOIN,
// CTEs, subqueries), quoted or schema-qualified (pg_catalog.lower is
// lower; other schemas need the operator), and PostgreSQL's field
// selection (x.f is f(x)) counts as a call of the refused functions that
// take one argument. Server-information functions (version(),
// current_setting...) are a list of their own, accepted only with
// Options.ServerInfo. Casts to the object identifier types (regclass...)
// are refused. Then the MySQL-dialect parser reads a normalized copy of the
// tokens (comments dropped, strings blanked, quoted names kept as names) to
// list the tables read; PostgreSQL-only syntax it cannot read leaves
// Statement.Parsed false, which is refused only when a table allow-list is
// configured. The database remains the last wall.
package validate

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on the input.
const (
	// maxLen is the longest statement accepted, in bytes.
	maxLen = 100_000
	// maxDepth is the deepest nesting of parentheses accepted.
	maxDepth = 64
)

// Hints returned with errors.
const (
	hintReadOnly = "lakegate runs a single read-only SELECT (or UNION/WITH ... SELECT); to change data use the ingest API"
	hintFunc     = "an operator can allow it with the allowed_functions setting (name, schema.name or schema.*); lakegate's own list holds pure computations only: math, string, pattern, date/time, formatting, aggregate, window, JSON, array, range, text search and cast functions"
	hintRegType  = "compare names as text instead; casts to regclass, regproc, regtype and the other reg* types look objects up by name and are not accepted"
	hintSystem   = "system schemas and catalogs (pg_catalog, information_schema, pg_*) and lakegate's own tables (lakegate_idempotency, lakegate_cluster_*) are not readable; use lakegate's catalog (table and column listing) instead"
	hintInfo     = "functions and tables that read server information (settings, versions, addresses, file paths, other sessions) are not open to this caller; remove the call"
	hintAllow    = "only the tables on the allow-list may be read; list the available tables with lakegate's catalog"
	hintParse    = "use CAST(x AS type) instead of ::, lower(a) LIKE lower(b) instead of ILIKE, subqueries instead of WITH, and no window functions, DISTINCT ON, FILTER, ARRAY[...] or interval '...'"
)

// TableRef is one table a statement reads, named as PostgreSQL resolves it:
// unquoted names lower-cased, double-quoted names exactly as written.
// Schema is empty when the name is not schema-qualified.
type TableRef struct {
	Schema string
	Name   string
}

// String returns schema.name, or name when there is no schema.
func (t TableRef) String() string {
	if t.Schema == "" {
		return t.Name
	}
	return t.Schema + "." + t.Name
}

// Options tune Check. A nil *Options means the defaults.
type Options struct {
	// AllowTable reports whether a table may be read. Nil allows every table
	// outside the system schemas (pg_catalog, information_schema, pg_*).
	// When set, statements whose tables cannot be listed (Parsed would be
	// false) are refused, and system schemas stay refused whatever it says.
	AllowTable func(t TableRef) bool
	// ServerInfo accepts the functions that read server information
	// rather than data (settings, version, addresses, file paths, start
	// times, WAL and replication state, other sessions; SQLite's version,
	// compile options and pragma tables). False, the default, refuses
	// them with an *Error whose ServerInfo names the function. Other
	// functions off the allow list stay refused either way.
	ServerInfo bool
	// AllowFunction reports whether a function off lakegate's allow list
	// may be called: schema is "" for an unqualified call, the schema as
	// PostgreSQL resolves it otherwise; name likewise. Nil allows none.
	// AllowFunctions builds one from the allowed_functions setting. It
	// never opens server-information functions (ServerInfo does) nor the
	// reg* types.
	AllowFunction func(schema, name string) bool
}

// Statement is what Check learned of an accepted statement.
type Statement struct {
	// Parsed is false when the MySQL-dialect parser could not read the
	// statement (PostgreSQL-only syntax) but the lexical checks passed; the
	// caller decides whether to run it as written.
	Parsed bool
	// Tables are the tables read, when Parsed: deduplicated, in order of
	// appearance.
	Tables []TableRef
}

// Error explains why a statement was refused.
type Error struct {
	// Reason is a sentence naming what was wrong, without the position.
	Reason string
	// Pos is the byte offset of the problem in the input, -1 if unknown.
	Pos int
	// Line and Col locate Pos, 1-based (Col counts characters); 0 if unknown.
	Line int
	Col  int
	// Hint says what is accepted.
	Hint string
	// ServerInfo names the server-information function or table refused
	// because Options.ServerInfo was false; empty for other refusals.
	ServerInfo string
	// Function names the function refused for being off the allow list,
	// schema-qualified when it was called so; empty for other refusals.
	Function string
}

// Error returns the reason followed by the position when it is known.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s at line %d, column %d", e.Reason, e.Line, e.Col)
	}
	return e.Reason
}

// newError builds an Error at byte offset pos of src (pos < 0: unknown).
func newError(src string, pos int, reason, hint string) *Error {
	e := &Error{Reason: reason, Pos: -1, Hint: hint}
	if pos >= 0 && pos <= len(src) {
		e.Pos = pos
		e.Line = 1 + strings.Count(src[:pos], "\n")
		lineStart := strings.LastIndexByte(src[:pos], '\n') + 1
		e.Col = 1 + utf8.RuneCountInString(src[lineStart:pos])
	}
	return e
}

// Check validates sql, one statement written by a caller, and returns what it
// learned, or an *Error explaining the refusal. opts may be nil.
func Check(sql string, opts *Options) (*Statement, error) {
	if opts == nil {
		opts = &Options{}
	}
	if len(sql) > maxLen {
		return nil, newError(sql, -1,
			fmt.Sprintf("statement is too long: %d bytes, the limit is %d", len(sql), maxLen),
			"send a shorter statement; pass long value lists as parameters")
	}
	if i := strings.IndexByte(sql, 0); i >= 0 {
		return nil, newError(sql, i, "NUL byte (\\x00) in the statement is not accepted", "remove the NUL byte")
	}
	if !utf8.ValidString(sql) {
		i := 0
		for i < len(sql) {
			r, size := utf8.DecodeRuneInString(sql[i:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			i += size
		}
		return nil, newError(sql, i, "the statement is not valid UTF-8", "send the statement as UTF-8 text")
	}
	toks, lexErr := lex(sql)
	if lexErr != nil {
		return nil, lexErr
	}
	if err := checkTokens(sql, toks, opts); err != nil {
		return nil, err
	}
	st, err := parseLayer(sql, toks, opts)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// checkTokens applies the lexical rules to the token stream.
func checkTokens(src string, toks []token, opts *Options) *Error {
	if len(toks) == 0 || len(toks) == 1 && isPunct(toks[0], ";") {
		return newError(src, -1, "the statement is empty", hintReadOnly)
	}
	first := toks[0]
	if !(first.kind == kIdent && (first.val == "select" || first.val == "with" || first.val == "values" || first.val == "table") || isPunct(first, "(")) {
		return newError(src, first.pos,
			fmt.Sprintf(`a statement must start with SELECT, WITH, VALUES, TABLE or "("; found %s`, describe(src, first)),
			hintReadOnly)
	}
	var open []int // positions of unclosed "("
	caseDepth := 0 // unclosed CASE
	prefixRun := 0 // operators and NOTs in a row
	for i, t := range toks {
		if t.kind == kOp || t.kind == kIdent && t.val == "not" {
			prefixRun++
		} else {
			prefixRun = 0
		}
		if prefixRun > maxDepth {
			return newError(src, t.pos, fmt.Sprintf("too many operators in a row: more than %d", maxDepth),
				"simplify the statement")
		}
		if t.kind == kIdent && t.val == "case" {
			caseDepth++
		} else if t.kind == kIdent && t.val == "end" && caseDepth > 0 {
			caseDepth--
		}
		switch t.kind {
		case kPunct:
			switch t.val {
			case ";":
				if i != len(toks)-1 {
					return newError(src, t.pos, `only one statement is accepted; found a second statement after ";"`, hintReadOnly)
				}
			case "(":
				open = append(open, t.pos)
			case ")":
				if len(open) == 0 {
					return newError(src, t.pos, `unbalanced parentheses: ")" has no matching "("`, "balance the parentheses")
				}
				open = open[:len(open)-1]
			}
		case kIdent:
			if err := checkWord(src, toks, i); err != nil {
				return err
			}
			if err := checkName(src, toks, i, opts); err != nil {
				return err
			}
		case kQIdent:
			if err := checkName(src, toks, i, opts); err != nil {
				return err
			}
		case kString:
			if err := checkString(src, t, opts); err != nil {
				return err
			}
		}
		if len(open)+caseDepth > maxDepth {
			return newError(src, t.pos, fmt.Sprintf("parentheses and CASE expressions are nested too deeply: more than %d levels", maxDepth),
				"simplify the statement")
		}
	}
	if len(open) > 0 {
		return newError(src, open[len(open)-1], `unbalanced parentheses: "(" is never closed`, "balance the parentheses")
	}
	return nil
}

// checkWord refuses keywords that have no place in a read-only query.
func checkWord(src string, toks []token, i int) *Error {
	t := toks[i]
	if isNamePosition(toks, i) {
		return nil
	}
	switch {
	case t.val == "for" && isLockClause(toks[i+1:]):
		return newError(src, t.pos, "row-locking clauses (FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE, FOR KEY SHARE) are not accepted in a read-only query", hintReadOnly)
	case t.val == "into":
		return newError(src, t.pos, "SELECT ... INTO creates a table and is not accepted", hintReadOnly+`; if "into" is a name here, write it in double quotes ("into")`)
	case isDeniedWord(t.val):
		return newError(src, t.pos,
			fmt.Sprintf("%s is not accepted: it writes data, changes the session or server, or controls transactions", strings.ToUpper(t.val)),
			fmt.Sprintf(`%s; if %q is a column or table name, write it in double quotes ("%s")`, hintReadOnly, t.val, t.val))
	}
	return nil
}

// checkName refuses calls of functions off the allow list, object
// identifier types (regclass...), system catalogs and, unless
// opts.ServerInfo, server-information functions and tables. A name after
// "." that PostgreSQL's field selection would call (x.f is f(x)) counts as
// a call.
func checkName(src string, toks []token, i int, opts *Options) *Error {
	t := toks[i]
	if isRegType(t.val) {
		return newError(src, t.pos, fmt.Sprintf("type %s is not accepted: it looks database objects up by name", t.val), hintRegType)
	}
	if isCall(toks, i) {
		schema := ""
		if i >= 2 && isPunct(toks[i-1], ".") && (toks[i-2].kind == kIdent || toks[i-2].kind == kQIdent) {
			schema = toks[i-2].val
		} else if i >= 1 && isPunct(toks[i-1], ".") {
			schema = "?" // (expr).f(...) is no valid call; judge it qualified
		}
		return checkCall(src, t.pos, schema, t.val, opts)
	}
	if i+1 < len(toks) && isPunct(toks[i+1], "(") {
		return nil // a keyword, an alias's column list or a type's modifiers
	}
	field := i > 0 && isPunct(toks[i-1], ".") && isFieldCall(t.val)
	switch {
	case field && isServerInfoFunc(t.val):
		if opts.ServerInfo {
			return nil
		}
		return infoError(src, t.pos, t.val, fmt.Sprintf("function %s reads server information", t.val))
	case field && !(opts.AllowFunction != nil && opts.AllowFunction("", t.val)):
		return funcError(src, t.pos, "", t.val)
	case isSystemName(t.val) && !isCatalogQualifier(toks, i):
		return newError(src, t.pos, fmt.Sprintf("system schema or catalog %s is not accepted", t.val), hintSystem)
	case !opts.ServerInfo && isServerInfoTable(t.val):
		return infoError(src, t.pos, t.val, fmt.Sprintf("table function %s reads server information", t.val))
	}
	return nil
}

// checkString refuses, unless opts.ServerInfo, a '...' string naming a
// server-information table: SQLite reads a string where a table belongs as
// the table's name (FROM 'pragma_database_list', x IN 'pragma_...').
func checkString(src string, t token, opts *Options) *Error {
	if opts.ServerInfo || src[t.pos] != '\'' || t.end-t.pos < 2 {
		return nil
	}
	name := strings.ReplaceAll(src[t.pos+1:t.end-1], "''", "'")
	if !isServerInfoTable(name) {
		return nil
	}
	return infoError(src, t.pos, name,
		fmt.Sprintf("string %s names table function %s, which reads server information (SQLite reads a string in a table's place as its name)", src[t.pos:t.end], name))
}

// infoError refuses a server-information function or table, name.
func infoError(src string, pos int, name, reason string) *Error {
	e := newError(src, pos, reason, hintInfo)
	e.ServerInfo = name
	return e
}

// isNamePosition reports whether the word at toks[i] can only be a name:
// right after "." or AS, or right before ".".
func isNamePosition(toks []token, i int) bool {
	if i > 0 && (isPunct(toks[i-1], ".") || toks[i-1].kind == kIdent && toks[i-1].val == "as") {
		return true
	}
	return i+1 < len(toks) && isPunct(toks[i+1], ".")
}

// isLockClause reports whether the tokens after FOR start a row-locking
// clause: UPDATE, SHARE, NO KEY UPDATE or KEY SHARE.
func isLockClause(rest []token) bool {
	word := func(k int, w string) bool {
		return k < len(rest) && rest[k].kind == kIdent && rest[k].val == w
	}
	return word(0, "update") || word(0, "share") ||
		word(0, "no") && word(1, "key") || word(0, "key") && word(1, "share")
}

func isPunct(t token, p string) bool { return t.kind == kPunct && t.val == p }

// describe names a token for an error message.
func describe(src string, t token) string {
	text := src[t.pos:t.end]
	switch t.kind {
	case kIdent:
		return strings.ToUpper(text)
	case kString:
		return "a string constant"
	}
	if len(text) > 40 {
		text = text[:40] + "..."
	}
	return fmt.Sprintf("%q", text)
}
