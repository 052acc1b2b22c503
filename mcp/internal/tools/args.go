package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// argsSchema is a tool's input schema from tools.json, resolved once at
// load. decode checks a call's arguments against it and decodes them
// into the handler's input type, so what the client reads in tools/list
// is exactly what the server accepts.
type argsSchema struct {
	resolved *jsonschema.Resolved
	names    []string // declared arguments, sorted
	required []string
	closed   bool // additionalProperties: false
}

// renamed are arguments that have a new name: a call that still uses the
// old one is told the new.
var renamed = map[string]string{"limit": "max_rows"}

// newArgsSchema resolves a tool's input schema and checks that every
// argument it declares is one the handler's input type has (args nil: a
// handler that takes any).
func newArgsSchema(raw json.RawMessage, args []string) (*argsSchema, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("input_schema: %w", err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("input_schema: %w", err)
	}
	a := &argsSchema{resolved: resolved, required: s.Required}
	for name := range s.Properties {
		if args != nil && !slices.Contains(args, name) {
			return nil, fmt.Errorf("input_schema: argument %q is not one the handler takes (%s)", name, strings.Join(args, ", "))
		}
		a.names = append(a.names, name)
	}
	sort.Strings(a.names)
	if ap := s.AdditionalProperties; ap != nil && ap.Not != nil && reflect.DeepEqual(*ap.Not, jsonschema.Schema{}) {
		a.closed = true // "additionalProperties": false
	}
	return a, nil
}

// decode checks raw against the schema and decodes it into in, a pointer.
// Every refusal is a validation error naming the argument, with the
// accepted arguments as its hint.
func (a *argsSchema) decode(raw json.RawMessage, in any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	// Read with go-sdk's decoder (wire.Parse), as go-sdk read the params
	// that hold them, into a map made for a call's few arguments (the
	// decoder would make one for 64).
	m := make(map[string]any, 8)
	if err := wire.Parse(raw, &m, 0); err != nil {
		return a.refuse("arguments must be a JSON object")
	}
	if a.closed {
		for _, name := range sortedKeys(m) {
			if slices.Contains(a.names, name) {
				continue
			}
			if now, ok := renamed[name]; ok && slices.Contains(a.names, now) {
				return a.refuse(fmt.Sprintf("argument %q is now %q", name, now))
			}
			return a.refuse(fmt.Sprintf("unknown argument %q", name))
		}
	}
	for _, name := range a.required {
		if v, ok := m[name]; !ok || v == nil {
			return a.refuse(fmt.Sprintf("argument %q is required", name))
		}
	}
	if err := a.resolved.Validate(m); err != nil {
		return a.refuse(schemaMessage(err))
	}
	if err := wire.Parse(raw, in, wire.Numbers); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			kind, _, _ := strings.Cut(te.Value, " ") // "number 1e400 overflows": its JSON kind
			return a.refuse(fmt.Sprintf("argument %q: got a JSON %s that does not fit %s", te.Field, kind, te.Type))
		}
		return a.refuse("arguments: " + strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func (a *argsSchema) refuse(msg string) error {
	e := &lakegate.Error{Kind: lakegate.KindValidation, Message: msg}
	if len(a.names) > 0 {
		e.Hint = "accepted arguments: " + strings.Join(a.names, ", ")
	}
	return e
}

// validating matches the prefixes jsonschema wraps a failure in, one per
// schema it descended through.
var validating = regexp.MustCompile(`validating ([^:]*): `)

// schemaMessage turns the validator's error into a sentence naming the
// argument: "argument "max_rows": minimum: -1 is less than 0".
func schemaMessage(err error) string {
	msg := err.Error()
	arg := ""
	for _, m := range validating.FindAllStringSubmatch(msg, -1) {
		if name, ok := strings.CutPrefix(m[1], "/properties/"); ok && arg == "" {
			arg, _, _ = strings.Cut(name, "/")
		}
	}
	if loc := validating.FindAllStringIndex(msg, -1); len(loc) > 0 {
		msg = msg[loc[len(loc)-1][1]:]
	}
	if arg == "" {
		return "arguments: " + msg
	}
	return fmt.Sprintf("argument %q: %s", arg, msg)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonFields lists the JSON names of a struct pointer's fields, nil for
// anything else (a map takes any argument).
func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	names := []string{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "":
			names = append(names, jsonFields(reflect.New(f.Type).Interface())...)
		case name != "" && name != "-":
			names = append(names, name)
		}
	}
	return names
}
