package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/sqlbuild"
	"github.com/lakegate/lakegate/query/validate"
)

// ToolParam declares one typed parameter of an operator-declared SQL tool.
type ToolParam struct {
	Name string `json:"name"`
	// Type is string, integer, number, boolean, timestamp or date.
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// SQLTool is an operator-declared statement with typed parameters, bound
// in declared order to $1..$n (or ?). Build it with NewSQLTool; it is
// immutable and safe for concurrent use.
type SQLTool struct {
	name, database, statement string
	params                    []ToolParam
}

// LimitArg is the argument of every SQL tool that caps its rows; no
// parameter may have this name.
const LimitArg = "limit"

// CursorArg is the argument of every SQL tool that continues a truncated
// result (its next_cursor); no parameter may take its name either.
const CursorArg = "cursor"

var paramName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]{0,62}$`)

// paramTypes maps a parameter type to its JSON schema.
var paramTypes = map[string]string{
	"string":    `{"type":"string"`,
	"integer":   `{"type":"integer"`,
	"number":    `{"type":"number"`,
	"boolean":   `{"type":"boolean"`,
	"timestamp": `{"type":"string","format":"date-time"`,
	"date":      `{"type":"string","format":"date"`,
}

// NewSQLTool checks a declaration once, at load time: the statement must
// pass validate.Check, its placeholders must be exactly the parameters,
// and the parameters must have distinct names and known types.
func NewSQLTool(name, database, statement string, params []ToolParam) (*SQLTool, error) {
	if database == "" {
		return nil, fmt.Errorf("database is required")
	}
	if strings.TrimSpace(statement) == "" {
		return nil, fmt.Errorf("statement is required")
	}
	// Server-information functions are the operator's to declare: each
	// call is checked again, with the caller's server_info_functions
	// policy, when it runs.
	if _, err := validate.Check(statement, &validate.Options{ServerInfo: true}); err != nil {
		return nil, fmt.Errorf("statement refused: %w", err)
	}
	seen := map[string]bool{}
	for i, p := range params {
		switch {
		case !paramName.MatchString(p.Name):
			return nil, fmt.Errorf("parameters[%d]: name must be a letter or _ then letters, digits or _", i)
		case p.Name == LimitArg || p.Name == CursorArg:
			return nil, fmt.Errorf("parameters[%d]: %q is reserved for paging (limit, cursor)", i, p.Name)
		case seen[p.Name]:
			return nil, fmt.Errorf("parameters[%d]: %q is declared twice", i, p.Name)
		case paramTypes[p.Type] == "":
			return nil, fmt.Errorf("parameters[%d] (%s): unknown type %q; types: string, integer, number, boolean, timestamp, date", i, p.Name, p.Type)
		}
		seen[p.Name] = true
	}
	if n, err := placeholders(statement); err != nil {
		return nil, err
	} else if n != len(params) {
		return nil, fmt.Errorf("the statement has %d placeholders but %d parameters are declared", n, len(params))
	}
	return &SQLTool{name: name, database: database, statement: trimSQL(statement), params: append([]ToolParam(nil), params...)}, nil
}

// Database is the database the tool's statement runs on.
func (t *SQLTool) Database() string { return t.database }

// InputSchema is the JSON schema of the tool's arguments: its parameters
// plus the optional limit and cursor.
func (t *SQLTool) InputSchema() json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	var req []string
	for _, p := range t.params {
		b.WriteString(jsonString(p.Name) + ":" + paramTypes[p.Type])
		if p.Description != "" {
			b.WriteString(`,"description":` + jsonString(p.Description))
		}
		b.WriteString("},")
		if p.Required {
			req = append(req, jsonString(p.Name))
		}
	}
	b.WriteString(`"limit":{"type":"integer","minimum":1},`)
	b.WriteString(`"cursor":{"type":"string","description":"next_cursor of a truncated result: continues it"}}`)
	if len(req) > 0 {
		b.WriteString(`,"required":[` + strings.Join(req, ",") + "]")
	}
	b.WriteString(`,"additionalProperties":false}`)
	return json.RawMessage(b.String())
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Request checks args (decoded with json.Number) against the parameters
// and makes the SQLRequest that runs the statement on a database of
// dialect d: values are converted to their type and bound in declared
// order, never spliced; a missing optional parameter is NULL.
func (t *SQLTool) Request(d Dialect, args map[string]any) (SQLRequest, error) {
	r := SQLRequest{Database: t.database, SQL: t.statement, Params: make([]any, len(t.params))}
	known := map[string]bool{LimitArg: true, CursorArg: true}
	for i, p := range t.params {
		known[p.Name] = true
		v, ok := args[p.Name]
		if !ok || v == nil {
			if p.Required {
				return r, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("argument %q is required", p.Name)}
			}
			continue
		}
		c, err := toolValue(v, p.Type, d)
		if err != nil {
			return r, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("argument %q: %v", p.Name, err)}
		}
		r.Params[i] = c
	}
	for name := range args {
		if !known[name] {
			return r, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("unknown argument %q", name),
				Hint: "accepted arguments: " + t.argNames()}
		}
	}
	if v, ok := args[LimitArg]; ok && v != nil {
		n, ok := toInt(v)
		if !ok || n < 1 || n > 1<<31 {
			return r, &lakegate.Error{Kind: lakegate.KindValidation, Message: "argument \"limit\": expected a positive integer"}
		}
		r.Limit = int(n)
	}
	if v, ok := args[CursorArg]; ok && v != nil {
		c, ok := v.(string)
		if !ok {
			return r, &lakegate.Error{Kind: lakegate.KindValidation, Message: "argument \"cursor\": expected the next_cursor string of a truncated result"}
		}
		r.Cursor = c
	}
	return r, nil
}

func (t *SQLTool) argNames() string {
	names := make([]string, 0, len(t.params)+1)
	for _, p := range t.params {
		names = append(names, p.Name)
	}
	return strings.Join(append(names, LimitArg, CursorArg), ", ")
}

// toolValue converts one argument to its declared type: as a column of
// that type takes it (sqlbuild.Convert), but stricter: no numbers as
// strings, no booleans as words.
func toolValue(v any, typ string, d Dialect) (any, error) {
	convert := func(t sqlbuild.Type, bad string) (any, error) {
		c, err := sqlbuild.Convert(v, t, d)
		if err != nil {
			return nil, errors.New(bad)
		}
		return c, nil
	}
	_, isStr := v.(string)
	switch typ {
	case "string":
		if isStr {
			return v, nil
		}
		return nil, fmt.Errorf("expected a string")
	case "integer":
		if isStr {
			return nil, fmt.Errorf("expected an integer")
		}
		return convert(sqlbuild.Type{Kind: sqlbuild.KindInt, Bits: 64}, "expected an integer")
	case "number":
		if isStr {
			return nil, fmt.Errorf("expected a number")
		}
		return convert(sqlbuild.Type{Kind: sqlbuild.KindFloat}, "expected a number")
	case "boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, fmt.Errorf("expected true or false")
	case "timestamp":
		if !isStr {
			return nil, fmt.Errorf("expected an RFC 3339 timestamp")
		}
		return convert(sqlbuild.Type{Kind: sqlbuild.KindTimestamptz}, "expected an RFC 3339 timestamp")
	case "date":
		if !isStr {
			return nil, fmt.Errorf("expected a date YYYY-MM-DD")
		}
		return convert(sqlbuild.Type{Kind: sqlbuild.KindDate}, "expected a date YYYY-MM-DD")
	}
	return nil, fmt.Errorf("unknown type %q", typ)
}

// toInt is v as an integer: a Go integer, a whole number, or integer text.
func toInt(v any) (int64, bool) {
	n, err := sqlbuild.Convert(v, sqlbuild.Type{Kind: sqlbuild.KindInt, Bits: 64}, Postgres)
	i, ok := n.(int64)
	return i, err == nil && ok
}

// placeholders counts the parameters of a statement: $1..$n (every one of
// them used) or, when there is none, ? marks; strings, quoted names and
// comments are skipped.
func placeholders(s string) (int, error) {
	maxN, marks := 0, 0
	used := map[int]bool{}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			// A doubled quote continues the string or name; in E'...'
			// a backslash escapes the next byte.
			esc := c == '\'' && i > 0 && (s[i-1] == 'E' || s[i-1] == 'e') && (i == 1 || !isWordByte(s[i-2]))
			for i++; i < len(s); i++ {
				if esc && s[i] == '\\' {
					i++
					continue
				}
				if s[i] == c {
					if i+1 < len(s) && s[i+1] == c {
						i++
						continue
					}
					break
				}
			}
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			depth := 0
			for ; i+1 < len(s); i++ {
				if s[i] == '/' && s[i+1] == '*' {
					depth++
					i++
				} else if s[i] == '*' && s[i+1] == '/' {
					depth--
					i++
					if depth == 0 {
						break
					}
				}
			}
		case c == '$' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' && (i == 0 || !isWordByte(s[i-1])):
			n := 0
			for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
				n = n*10 + int(s[i]-'0')
				if n > 1000 {
					return 0, fmt.Errorf("placeholder $%d is out of range", n)
				}
			}
			i--
			used[n] = true
			maxN = max(maxN, n)
		case c == '$':
			// A dollar-quoted string: $tag$ ... $tag$.
			end := strings.IndexByte(s[i+1:], '$')
			if end < 0 || (i > 0 && isWordByte(s[i-1])) {
				continue
			}
			tag := s[i : i+end+2]
			if strings.Trim(tag[1:len(tag)-1], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
				continue
			}
			close := strings.Index(s[i+len(tag):], tag)
			if close < 0 {
				return 0, fmt.Errorf("unterminated dollar-quoted string")
			}
			i += len(tag) + close + len(tag) - 1
		case c == '?':
			marks++
		}
	}
	if maxN > 0 {
		for n := 1; n <= maxN; n++ {
			if !used[n] {
				return 0, fmt.Errorf("placeholder $%d is never used (placeholders must be $1..$%d)", n, maxN)
			}
		}
		return maxN, nil
	}
	return marks, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
