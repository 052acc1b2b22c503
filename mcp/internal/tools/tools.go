package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

// ToolsFile is the name of the tool declarations in a config directory.
const ToolsFile = "tools.json"

// toolsDoc is the shape of tools.json.
type toolsDoc struct {
	Tools  []Spec  `json:"tools"`
	Groups []Group `json:"groups,omitempty"`
}

// Declarations is what a tools.json declares, checked: the tools, and the
// groups that serve some of them on routes of their own (groups.go).
type Declarations struct {
	Source string // the file read, or "built-in tools.json"
	Tools  []Spec
	Groups []Group
}

// Spec declares one tool: what the client sees and which handler runs.
type Spec struct {
	Name         string                  `json:"name"`
	Title        string                  `json:"title,omitempty"`
	Description  string                  `json:"description"`
	Handler      string                  `json:"handler"`
	InputSchema  json.RawMessage         `json:"input_schema"`
	OutputSchema json.RawMessage         `json:"output_schema,omitempty"`
	Annotations  *mcpsdk.ToolAnnotations `json:"annotations,omitempty"`
	// Database, Statement and Parameters declare a tool of handler "sql"
	// (an operator's parameterized statement; see prepareTool).
	Database   string            `json:"database,omitempty"`
	Statement  string            `json:"statement,omitempty"`
	Parameters []query.ToolParam `json:"parameters,omitempty"`
	// Timeout overrides the statement timeout for this tool's queries
	// ("5s", "2m"; at most 10m).
	Timeout string `json:"timeout,omitempty"`
	// Roles, when set, are the roles that see the tool in tools/list and
	// may call it (an admin, every role); to anyone else it does not
	// exist. Empty: every caller.
	Roles []string `json:"roles,omitempty"`
	// Confirm asks the person behind the client to confirm each call
	// before it runs, where the client can ask (MCP elicitation, form).
	Confirm bool `json:"confirm,omitempty"`
	// Cache false has every call read now, never from the result cache
	// (as fresh: true does for one call).
	Cache   *bool `json:"cache,omitempty"`
	timeout time.Duration
	sqlTool *query.SQLTool
	args    *argsSchema
}

// run is the declared tool as the Set runs it: its handler, the
// statement of a "sql" tool bound to it.
func (t Spec) run() tool {
	h := handlers()[t.Handler]
	if t.sqlTool != nil {
		h = sqlHandler(t.sqlTool)
	}
	return tool{name: t.Name, timeout: t.timeout, args: t.args, handler: h, confirm: t.Confirm, fresh: t.Cache != nil && !*t.Cache}
}

// Tool is the declared tool as clients see it in tools/list.
func (t Spec) Tool() *mcpsdk.Tool {
	tool := &mcpsdk.Tool{
		Name:        t.Name,
		Title:       t.Title,
		Description: t.Description,
		InputSchema: t.InputSchema,
		Annotations: t.Annotations,
	}
	if len(t.OutputSchema) > 0 {
		tool.OutputSchema = t.OutputSchema
	}
	return tool
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Load reads the tool declarations: dir/tools.json when it exists,
// else the built-in data. prompts are the prompts a group may name; a
// group that names none is given them all. Any problem names the file,
// the line and the reason.
func Load(builtin []byte, dir string, prompts []string) (*Declarations, error) {
	data, source := builtin, "built-in tools.json"
	if dir != "" {
		file := filepath.Join(dir, ToolsFile)
		b, err := os.ReadFile(file)
		switch {
		case err == nil:
			data, source = b, file
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("tools: %w", err)
		}
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("tools: no tool declarations (%s is empty)", source)
	}
	d, err := parseTools(data, prompts)
	if err != nil {
		return nil, fmt.Errorf("tools: %s: %w", source, err)
	}
	d.Source = source
	return d, nil
}

func parseTools(data []byte, prompts []string) (*Declarations, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc toolsDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, atLine(data, dec.InputOffset(), err)
	}
	if len(doc.Tools) == 0 {
		return nil, errors.New(`no tools declared: want {"tools": [...]}`)
	}
	known := handlerNames()
	seen := map[string]bool{}
	for i, t := range doc.Tools {
		where := fmt.Sprintf("tools[%d]", i)
		if t.Name != "" {
			where += " (" + t.Name + ")"
		}
		off := elementOffset(data, "tools", i)
		switch {
		case !toolName.MatchString(t.Name):
			return nil, atLine(data, off, fmt.Errorf("%s: name must be 1-64 letters, digits, _ or -", where))
		case seen[t.Name]:
			return nil, atLine(data, off, fmt.Errorf("%s: name is declared twice", where))
		case t.Description == "":
			return nil, atLine(data, off, fmt.Errorf("%s: description is required", where))
		case !slices.Contains(known, t.Handler):
			return nil, atLine(data, off, fmt.Errorf("%s: unknown handler %q; known handlers: %v", where, t.Handler, known))
		}
		seen[t.Name] = true
		for _, r := range t.Roles {
			if !slices.Contains(lakegate.Roles, r) {
				return nil, atLine(data, off, fmt.Errorf("%s: role %q: want one of %v", where, r, lakegate.Roles))
			}
		}
		if t.Timeout != "" {
			d, err := time.ParseDuration(t.Timeout)
			if err != nil || d < 100*time.Millisecond || d > 10*time.Minute {
				return nil, atLine(data, off, fmt.Errorf("%s: timeout %q: want a duration from 100ms to 10m, like \"5s\"", where, t.Timeout))
			}
			doc.Tools[i].timeout = d
		}
		if err := prepareTool(&doc.Tools[i]); err != nil {
			return nil, atLine(data, off, fmt.Errorf("%s: %w", where, err))
		}
		t = doc.Tools[i]
		if err := checkSchema(t.InputSchema, true); err != nil {
			return nil, atLine(data, off, fmt.Errorf("%s: input_schema: %w", where, err))
		}
		if len(t.OutputSchema) > 0 {
			if err := checkSchema(t.OutputSchema, true); err != nil {
				return nil, atLine(data, off, fmt.Errorf("%s: output_schema: %w", where, err))
			}
		}
		args, err := newArgsSchema(t.InputSchema, handlers()[t.Handler].args)
		if err != nil {
			return nil, atLine(data, off, fmt.Errorf("%s: %w", where, err))
		}
		doc.Tools[i].args = args
	}
	if err := checkGroups(data, doc.Groups, doc.Tools, prompts); err != nil {
		return nil, err
	}
	return &Declarations{Tools: doc.Tools, Groups: doc.Groups}, nil
}

// checkSchema accepts a JSON object schema of type "object".
func checkSchema(raw json.RawMessage, required bool) error {
	if len(raw) == 0 {
		if required {
			return errors.New(`is required (a JSON schema with "type": "object")`)
		}
		return nil
	}
	var s struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("want a JSON schema object: %w", err)
	}
	if s.Type != "object" {
		return fmt.Errorf(`"type" must be "object", got %q`, s.Type)
	}
	return nil
}

// elementOffset finds the byte offset of the i-th element of the top-level
// array key ("tools", "groups"), for error messages; -1 if it cannot.
func elementOffset(data []byte, key string, i int) int64 {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, n := 0, -1
	inKey := false
	for {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return -1
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				if inKey && depth == 2 && v == '{' {
					n++
					if n == i {
						for off < int64(len(data)) && bytes.IndexByte([]byte(" \t\r\n,"), data[off]) >= 0 {
							off++
						}
						return off
					}
				}
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 {
				inKey = v == key
			}
		}
	}
}

func atLine(data []byte, off int64, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		off = te.Offset
		err = fmt.Errorf("field %q: got a JSON %s, want %s", te.Field, te.Value, te.Type)
	}
	if off < 0 {
		return err
	}
	off = min(off, int64(len(data)))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	return fmt.Errorf("line %d: %w", line, err)
}

// resultSchema is the output schema of tools that return a query result
// (ResultMeta).
const resultSchema = `{"type":"object","properties":{"columns":{"type":"array","items":{"type":"object"}},` +
	`"row_count":{"type":"integer"},"truncated":{"type":"boolean"},"mode":{"type":"string","enum":["inline","blocks"]},` +
	`"transfer":{"type":"object"}},"required":["columns","row_count","truncated","mode"]}`

// prepareTool completes a declaration at load time. For handler "sql" it
// checks the statement once (validator, placeholders against parameters)
// and generates the input and output schemas, so a refused statement
// stops start-up with the tool's name and the reason.
func prepareTool(t *Spec) error {
	if t.Handler != "sql" {
		if t.Database != "" || t.Statement != "" || t.Parameters != nil {
			return errors.New(`database, statement and parameters are only for handler "sql"`)
		}
		return nil
	}
	if len(t.InputSchema) > 0 {
		return errors.New(`input_schema is generated from parameters for handler "sql"; remove it`)
	}
	tool, err := query.NewSQLTool(t.Name, t.Database, t.Statement, t.Parameters)
	if err != nil {
		return err
	}
	t.sqlTool = tool
	t.InputSchema = tool.InputSchema()
	if len(t.OutputSchema) == 0 {
		t.OutputSchema = json.RawMessage(resultSchema)
	}
	if t.Annotations == nil {
		f := false
		t.Annotations = &mcpsdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &f, IdempotentHint: true, OpenWorldHint: &f}
	}
	return nil
}
