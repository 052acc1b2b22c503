package validate

import "fmt"

// Function calls: which names followed by "(" call a function (not a
// keyword, a type's modifiers, an alias's or a CTE's column list), and
// whether the allow list, the server-information policy or the operator's
// allowed_functions lets a call through.

// checkCall judges a call of name, qualified by schema ("" when not): on
// the allow list (unqualified or pg_catalog), an unqualified
// server-information function with opts.ServerInfo (pg_catalog.version()
// stays refused, as before the allow list), or allowed by
// opts.AllowFunction.
func checkCall(src string, pos int, schema, name string, opts *Options) *Error {
	builtin := schema == "" || schema == "pg_catalog"
	switch {
	case builtin && isAllowedFunc(name):
		return nil
	case schema == "" && isServerInfoFunc(name):
		if opts.ServerInfo {
			return nil
		}
		return infoError(src, pos, name, fmt.Sprintf("function %s reads server information", qualified(schema, name)))
	case opts.AllowFunction != nil && opts.AllowFunction(schema, name):
		return nil
	}
	return funcError(src, pos, schema, name)
}

// funcError refuses a call of a function off the allow list.
func funcError(src string, pos int, schema, name string) *Error {
	e := newError(src, pos, fmt.Sprintf("function %s is not on lakegate's list of allowed functions", qualified(schema, name)), hintFunc)
	e.Function = qualified(schema, name)
	return e
}

// qualified writes schema.name, or name when schema is empty.
func qualified(schema, name string) string {
	if schema == "" {
		return name
	}
	return schema + "." + name
}

// isCall reports whether the name at toks[i], followed by "(", calls a
// function. It is not a call when the name is a keyword that takes
// parentheses (IN, EXISTS, OVER...), a type's modifiers (x::numeric(10,2),
// CAST(x AS varchar(10))), a sampling method (TABLESAMPLE system (10)),
// an alias's column list (FROM f() AS g(i), FROM f() g(i), FROM t x(a, b))
// or a CTE's (WITH x(a, b) AS (...)).
func isCall(toks []token, i int) bool {
	if i+1 >= len(toks) || !isPunct(toks[i+1], "(") {
		return false
	}
	t := toks[i]
	if t.kind == kIdent && inSorted(syntaxWords, t.val) {
		return false
	}
	if i == 0 {
		return true
	}
	p := toks[i-1]
	switch {
	case isPunct(p, "::"), isPunct(p, ")"):
		return false
	case p.kind == kIdent && (p.val == "as" || p.val == "tablesample"):
		return false
	case (p.kind == kQIdent || p.kind == kIdent && !inSorted(exprKeywords, p.val)) && inFromList(toks, i-1):
		return false // FROM t x(a, b)
	}
	return !isCTEColumns(toks, i)
}

// clauseWords end a FROM list when read backwards: the clause before it
// or a clause that follows it.
var clauseWords = map[string]bool{
	"select": true, "where": true, "group": true, "having": true, "order": true, "limit": true,
	"offset": true, "on": true, "using": true, "window": true, "union": true, "intersect": true,
	"except": true, "returning": true, "values": true, "when": true, "then": true, "else": true,
	"and": true, "or": true, "by": true, "case": true, "fetch": true, "for": true, "with": true,
}

// inFromList reports whether the name at toks[j] is in a FROM list, where
// a name after it is its alias: reading back at the same depth, FROM or
// JOIN comes before any other clause. An unmatched "(" ends the search:
// not in a FROM list.
func inFromList(toks []token, j int) bool {
	depth := 0
	for k := j - 1; k >= 0; k-- {
		t := toks[k]
		switch {
		case isPunct(t, ")"):
			depth++
		case isPunct(t, "("):
			if depth == 0 {
				return false
			}
			depth--
		case depth == 0 && t.kind == kIdent && (t.val == "from" || t.val == "join"):
			return true
		case depth == 0 && t.kind == kIdent && clauseWords[t.val]:
			return false
		}
	}
	return false
}

// isCTEColumns reports whether toks[i] names a CTE with a column list:
// after WITH, RECURSIVE or ",", names and commas only in the parentheses,
// then AS [NOT] [MATERIALIZED] (.
func isCTEColumns(toks []token, i int) bool {
	if i == 0 {
		return false
	}
	if p := toks[i-1]; !(isPunct(p, ",") || p.kind == kIdent && (p.val == "with" || p.val == "recursive")) {
		return false
	}
	j := i + 2
	for ; j < len(toks) && !isPunct(toks[j], ")"); j++ {
		if k := toks[j].kind; k != kIdent && k != kQIdent && !isPunct(toks[j], ",") {
			return false
		}
	}
	word := func(k int, w string) bool { return k < len(toks) && toks[k].kind == kIdent && toks[k].val == w }
	j++
	if !word(j, "as") {
		return false
	}
	j++
	if word(j, "not") {
		j++
	}
	if word(j, "materialized") {
		j++
	}
	return j < len(toks) && isPunct(toks[j], "(")
}

// isCatalogQualifier reports whether toks[i] is pg_catalog qualifying a
// call: pg_catalog.lower(x), whose call is judged by the allow list.
func isCatalogQualifier(toks []token, i int) bool {
	return toks[i].val == "pg_catalog" && i+3 < len(toks) && isPunct(toks[i+1], ".") &&
		(toks[i+2].kind == kIdent || toks[i+2].kind == kQIdent) && isCall(toks, i+2)
}
