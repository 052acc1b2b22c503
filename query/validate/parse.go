package validate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/xwb1989/sqlparser"
)

// mysqlOps are the operators rendered to the parser as written; every other
// operator is rendered as "+". Only the tables and functions the parser finds
// are used, so an operator's meaning does not matter, but some PostgreSQL
// operators are something else to MySQL: # starts a comment, // too, @x is a
// variable, ? a placeholder.
var mysqlOps = map[string]bool{
	"+": true, "-": true, "*": true, "/": true, "%": true, "=": true,
	"<": true, ">": true, "<=": true, ">=": true, "<>": true, "!=": true,
	"||": true, "&": true, "|": true, "^": true, "~": true, "<<": true, ">>": true,
}

// render writes the tokens as text for the MySQL-dialect parser, so that it
// sees exactly the token structure PostgreSQL sees: comments are gone,
// strings are blanked (their content never matters and MySQL escapes them
// differently), quoted identifiers become `backquoted` (MySQL reads "x" as a
// string), parameters become :p1 placeholders, and a final ";" is dropped.
// starts holds each rendered token's offset, to map parser errors back.
func render(toks []token) (text string, starts []int) {
	var b strings.Builder
	starts = make([]int, 0, len(toks))
	for i, t := range toks {
		if i == len(toks)-1 && isPunct(t, ";") {
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		starts = append(starts, b.Len())
		switch t.kind {
		case kQIdent:
			b.WriteByte('`')
			b.WriteString(strings.ReplaceAll(t.val, "`", "``"))
			b.WriteByte('`')
		case kString:
			b.WriteString("''")
		case kParam:
			b.WriteString(":p")
			b.WriteString(t.val)
		case kOp:
			if mysqlOps[t.val] {
				b.WriteString(t.val)
			} else {
				b.WriteByte('+')
			}
		default: // kIdent (already lower-cased), kNumber, kPunct
			b.WriteString(t.val)
		}
	}
	return b.String(), starts
}

// parse runs the parser, which panics on some inputs.
func parse(text string) (stmt sqlparser.Statement, err error) {
	defer func() {
		if r := recover(); r != nil {
			stmt, err = nil, fmt.Errorf("parser panic: %v", r)
		}
	}()
	return sqlparser.Parse(text)
}

// parseLayer lists the tables the statement reads and applies the table
// rules. A statement the parser cannot read passes with Parsed false, unless
// an allow-list is configured.
func parseLayer(src string, toks []token, opts *Options) (*Statement, *Error) {
	text, starts := render(toks)
	stmt, err := parse(text)
	if err != nil {
		if opts.AllowTable == nil {
			return &Statement{Parsed: false}, nil
		}
		pos, near := -1, "the checker could not read it"
		if i := errorToken(err, starts); i >= 0 {
			pos, near = toks[i].pos, "the checker stopped at "+describe(src, toks[i])
		}
		return nil, newError(src, pos,
			"the tables this statement reads cannot be checked against the table allow-list; rewrite without PostgreSQL-only syntax: "+near,
			hintParse)
	}
	switch stmt.(type) {
	case *sqlparser.Select, *sqlparser.Union, *sqlparser.ParenSelect:
	default:
		return nil, newError(src, -1,
			fmt.Sprintf("only SELECT statements are accepted; this one reads as %T", stmt), hintReadOnly)
	}
	tables, bad := collect(src, toks, stmt, opts)
	if bad != nil {
		return nil, bad
	}
	for _, t := range tables {
		switch {
		case isSystemName(t.Schema) || isSystemName(t.Name):
			return nil, newError(src, tablePos(toks, t), fmt.Sprintf("system table %s is not accepted", t), hintSystem)
		case !opts.ServerInfo && isServerInfoTable(t.Name):
			return nil, infoError(src, tablePos(toks, t), t.Name, fmt.Sprintf("table function %s reads server information", t.Name))
		case opts.AllowTable != nil && !opts.AllowTable(t):
			return nil, newError(src, tablePos(toks, t), fmt.Sprintf("table %s is not on the table allow-list", t), hintAllow)
		}
	}
	return &Statement{Parsed: true, Tables: tables}, nil
}

// errStop ends a walk early.
var errStop = errors.New("stop")

// collect walks the syntax tree for the tables read, refusing locking
// clauses and calls of functions off the allow list (server-information
// functions unless opts.ServerInfo) on the way.
func collect(src string, toks []token, stmt sqlparser.Statement, opts *Options) ([]TableRef, *Error) {
	var tables []TableRef
	var bad *Error
	seen := map[TableRef]bool{}
	// The parser invents a table "dual" for a SELECT without FROM; keep it
	// only if the statement names it.
	dual := TableRef{Name: "dual"}
	seen[dual] = !hasWord(toks, "dual")
	_ = sqlparser.Walk(func(node sqlparser.SQLNode) (bool, error) {
		switch n := node.(type) {
		case *sqlparser.Select:
			if n.Lock != "" {
				bad = newError(src, -1, "row-locking clauses (FOR UPDATE, LOCK IN SHARE MODE) are not accepted in a read-only query", hintReadOnly)
			}
		case *sqlparser.Union:
			if n.Lock != "" {
				bad = newError(src, -1, "row-locking clauses (FOR UPDATE, LOCK IN SHARE MODE) are not accepted in a read-only query", hintReadOnly)
			}
		case *sqlparser.AliasedTableExpr:
			if tn, ok := n.Expr.(sqlparser.TableName); ok {
				t := TableRef{Schema: tn.Qualifier.String(), Name: tn.Name.String()}
				if !seen[t] {
					seen[t] = true
					tables = append(tables, t)
				}
			}
		case *sqlparser.FuncExpr:
			bad = checkCall(src, -1, n.Qualifier.String(), n.Name.String(), opts)
		}
		if bad != nil {
			return false, errStop
		}
		return true, nil
	}, stmt)
	return tables, bad
}

// hasWord reports whether an identifier token named w is in toks.
func hasWord(toks []token, w string) bool {
	for _, t := range toks {
		if (t.kind == kIdent || t.kind == kQIdent) && t.val == w {
			return true
		}
	}
	return false
}

// tablePos returns the offset of the first token naming t, or -1.
func tablePos(toks []token, t TableRef) int {
	for _, tok := range toks {
		if (tok.kind == kIdent || tok.kind == kQIdent) && tok.val == t.Name {
			return tok.pos
		}
	}
	return -1
}

// errorToken maps a parser error ("syntax error at position N near 'x'",
// N just past the offending token in the rendered text) to a token index,
// or -1.
func errorToken(err error, starts []int) int {
	var n int
	if _, scanErr := fmt.Sscanf(err.Error(), "syntax error at position %d", &n); scanErr != nil {
		return -1
	}
	i := -1
	for k, s := range starts {
		if s < n {
			i = k
		}
	}
	return i
}
