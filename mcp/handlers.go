package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/lakegate/lakegate"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/query"
)

// handlerFunc runs one tool: it decodes its arguments and returns the
// structured result.
type handlerFunc func(ctx context.Context, p *Plugin, c call, args json.RawMessage) (any, error)

// call is who calls a tool, and the tool's own statement timeout (zero:
// the engine's).
type call struct {
	lakegate.Caller
	timeout time.Duration
}

// handlers maps the handler names usable in tools.json to their code.
func handlers() map[string]handlerFunc {
	return map[string]handlerFunc{
		"list_databases":    listDatabases,
		"list_tables":       listTables,
		"describe_table":    describeTable,
		"query":             runQuery,
		"run_sql":           runSQL,
		"query_time_series": runTimeSeries,
		"explain":           runExplain,
		"get_result_block":  getResultBlock,
		// sql runs an operator-declared statement; its code is made per
		// tool by sqlHandler.
		"sql": nil,
	}
}

func handlerNames() []string {
	names := make([]string, 0, len(handlers()))
	for name := range handlers() {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// handle adapts a declared tool to the SDK: it takes a worker slot, runs
// the handler and renders the result or the error as a tool result.
func (p *Plugin) handle(t toolSpec) mcpsdk.ToolHandler {
	fn := handlers()[t.Handler]
	if t.sqlTool != nil {
		fn = sqlHandler(t.sqlTool)
	}
	return func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		start := time.Now()
		caller, _ := lakegate.CallerFrom(ctx)
		ctx, stop := p.untilCallerGone(ctx, req)
		defer stop()
		out, err := p.withWorker(ctx, func() (any, error) {
			return fn(ctx, p, call{Caller: caller, timeout: t.timeout}, req.Params.Arguments)
		})
		p.count(t.Name, err != nil)
		d := time.Since(start)
		log := p.log.With(callLog(req, []any{lakegate.LogTool, t.Name, lakegate.LogSubject, caller.Subject, lakegate.LogDuration, d.Milliseconds()})...)
		if err != nil {
			p.observeCall(t.Name, d, nil, nil, err)
			level := slog.LevelInfo
			if errors.Is(err, errBlockStorage) {
				level = slog.LevelError // the operator's to fix, not the caller's
			}
			log.Log(ctx, level, "tool call failed", "kind", string(lakegate.KindOf(err)), "error", err.Error())
			return errorResult(err), nil
		}
		res, err := p.structuredResult(out)
		p.observeCall(t.Name, d, out, res, err)
		log.Info("tool call")
		return res, err
	}
}

// withWorker runs fn holding a slot of p.workers: the host's shared pool,
// which also applies its per-subject limits, or the plugin's own.
func (p *Plugin) withWorker(ctx context.Context, fn func() (any, error)) (any, error) {
	release, err := p.workers.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return fn()
}

// structuredResult returns v as structured content and as text. Query
// results render themselves (answer.render: CSV text, metadata as
// structured content); a block read by get_result_block is its rows as
// text; everything else is the same JSON as text and structured content.
func (p *Plugin) structuredResult(v any) (*mcpsdk.CallToolResult, error) {
	if a, ok := v.(*answer); ok {
		return a.render(p.opts.PreviewCellBytes)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode tool result: %w", err)
	}
	var content []mcpsdk.Content
	switch r := v.(type) {
	case *blockText:
		content = []mcpsdk.Content{&mcpsdk.TextContent{Text: string(r.data)}}
	default:
		content = []mcpsdk.Content{&mcpsdk.TextContent{Text: string(data)}}
	}
	return &mcpsdk.CallToolResult{Content: content, StructuredContent: json.RawMessage(data)}, nil
}

// ErrorBody is lakegate.ErrorBody, the JSON error object of the
// taxonomy, shared by REST answers and failed tool results.
type ErrorBody = lakegate.ErrorBody

// NewErrorBody is lakegate.NewErrorBody.
func NewErrorBody(err error) ErrorBody { return lakegate.NewErrorBody(err) }

func errorResult(err error) *mcpsdk.CallToolResult {
	text, _ := json.Marshal(map[string]ErrorBody{"error": NewErrorBody(err)})
	return &mcpsdk.CallToolResult{
		IsError: true,
		Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: string(text)}},
	}
}

// decodeArgs reads a tool's arguments strictly into v: unknown fields and
// wrong types are validation errors that say what is accepted.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		accepted := strings.Join(jsonFields(v), ", ")
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("argument %q: got a JSON %s, want %s", te.Field, te.Value, te.Type), Hint: "accepted arguments: " + accepted}
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: "arguments: " + msg, Hint: "accepted arguments: " + accepted}
	}
	return nil
}

// jsonFields lists the JSON names of a struct pointer's fields.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
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

func required(name, value string) error {
	if value == "" {
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("argument %q is required", name)}
	}
	return nil
}

func listDatabases(_ context.Context, p *Plugin, c call, args json.RawMessage) (any, error) {
	var in struct{}
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	return map[string]any{"databases": p.databasesFor(c.Caller)}, nil
}

func listTables(ctx context.Context, p *Plugin, c call, args json.RawMessage) (any, error) {
	var in struct {
		Database string `json:"database"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	if err := required("database", in.Database); err != nil {
		return nil, err
	}
	tables, err := p.engine.Tables(ctx, c.Caller, in.Database)
	if err != nil {
		return nil, err
	}
	return map[string]any{"database": in.Database, "tables": tables}, nil
}

func describeTable(ctx context.Context, p *Plugin, c call, args json.RawMessage) (any, error) {
	var in struct {
		Database string `json:"database"`
		Table    string `json:"table"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	if err := errors.Join(required("database", in.Database), required("table", in.Table)); err != nil {
		return nil, firstError(err)
	}
	return p.engine.Describe(ctx, c.Caller, in.Database, in.Table)
}

func runQuery(ctx context.Context, p *Plugin, c call, args json.RawMessage) (any, error) {
	var in struct {
		query.Request
		resultArgs
	}
	if err := refuseLimit(args); err != nil {
		return nil, err
	}
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	if err := errors.Join(required("database", in.Database), required("table", in.Table)); err != nil {
		return nil, firstError(err)
	}
	limit, f, err := in.check()
	if err != nil {
		return nil, err
	}
	r := in.Request
	r.Limit = limit
	st, err := p.engine.PrepareQuery(ctx, c.Caller, r)
	if err != nil {
		return nil, err
	}
	return p.answer(ctx, c, st, f, in.Export)
}

func runSQL(ctx context.Context, p *Plugin, c call, args json.RawMessage) (any, error) {
	var in struct {
		Database string `json:"database"`
		SQL      string `json:"sql"`
		Params   []any  `json:"params"`
		Cursor   string `json:"cursor"`
		resultArgs
	}
	if err := refuseLimit(args); err != nil {
		return nil, err
	}
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	if err := errors.Join(required("database", in.Database), required("sql", in.SQL)); err != nil {
		return nil, firstError(err)
	}
	limit, f, err := in.check()
	if err != nil {
		return nil, err
	}
	st, err := p.engine.PrepareSQL(ctx, c.Caller, query.SQLRequest{Database: in.Database, SQL: in.SQL, Params: in.Params, Limit: limit, Cursor: in.Cursor})
	if err != nil {
		return nil, err
	}
	return p.answer(ctx, c, st, f, in.Export)
}

// firstError unwraps a joined error to its first part, keeping its kind.
func firstError(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
		return j.Unwrap()[0]
	}
	return err
}

// analysisEngine is what query_time_series and explain need of the
// engine beyond Engine; *query.Engine has it.
type analysisEngine interface {
	PrepareTimeSeries(ctx context.Context, c lakegate.Caller, r query.TimeSeriesRequest) (*query.Stmt, error)
	Explain(ctx context.Context, c lakegate.Caller, db, sql string, analyze bool, format string) (*query.Plan, error)
}

var _ analysisEngine = (*query.Engine)(nil)

func (p *Plugin) analysis() (analysisEngine, error) {
	if ae, ok := p.engine.(analysisEngine); ok {
		return ae, nil
	}
	return nil, lakegate.Errorf(lakegate.KindUnavailable, "this server's engine has no time series or explain")
}

func runTimeSeries(ctx context.Context, p *Plugin, c call, args json.RawMessage) (any, error) {
	var in query.TimeSeriesRequest
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	if err := errors.Join(required("database", in.Database), required("table", in.Table),
		required("time_column", in.TimeColumn), required("start", in.Start), required("end", in.End)); err != nil {
		return nil, firstError(err)
	}
	ae, err := p.analysis()
	if err != nil {
		return nil, err
	}
	st, err := ae.PrepareTimeSeries(ctx, c.Caller, in)
	if err != nil {
		return nil, err
	}
	return p.answer(ctx, c, st, query.FormatNDJSON, false)
}

func runExplain(ctx context.Context, p *Plugin, c call, args json.RawMessage) (any, error) {
	var in struct {
		Database string `json:"database"`
		SQL      string `json:"sql"`
		Analyze  bool   `json:"analyze"`
		Format   string `json:"format"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	if err := errors.Join(required("database", in.Database), required("sql", in.SQL)); err != nil {
		return nil, firstError(err)
	}
	ae, err := p.analysis()
	if err != nil {
		return nil, err
	}
	return ae.Explain(ctx, c.Caller, in.Database, in.SQL, in.Analyze, in.Format)
}

// sqlHandler runs an operator-declared statement: the arguments are
// checked against its typed parameters and bound in declared order, and
// the statement runs like run_sql (validated, read-only, timeout, row cap).
func sqlHandler(tool *query.SQLTool) handlerFunc {
	return func(ctx context.Context, p *Plugin, c call, args json.RawMessage) (any, error) {
		var in map[string]any
		if err := decodeArgs(args, &in); err != nil {
			return nil, err
		}
		var dialect query.Dialect
		for _, db := range p.engine.Databases() {
			if db.Name == tool.Database() {
				dialect = db.Dialect
			}
		}
		if dialect == "" {
			return nil, lakegate.Errorf(lakegate.KindUnavailable, "the tool's database %q is not configured", tool.Database())
		}
		r, err := tool.Request(dialect, in)
		if err != nil {
			return nil, err
		}
		st, err := p.engine.PrepareSQL(ctx, c.Caller, r)
		if err != nil {
			return nil, err
		}
		return p.answer(ctx, c, st, query.FormatNDJSON, false)
	}
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
func prepareTool(t *toolSpec) error {
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

// untilCallerGone returns ctx cancelled also when the client that made
// the call goes away: its legacy SSE session closes (the client left or
// stopped reading), or the Streamable HTTP POST that carries the call ends
// before its answer (the client disconnected). Nothing more is then
// produced for nobody, and the query stops in the database. stop releases
// the watch.
func (p *Plugin) untilCallerGone(ctx context.Context, req *mcpsdk.CallToolRequest) (context.Context, func()) {
	gone := p.goneSignal(req)
	if gone == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-gone:
			cancel()
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		cancel()
	}
}

// goneSignal is the channel closed when the caller of req goes away, or
// nil when there is none to watch.
func (p *Plugin) goneSignal(req *mcpsdk.CallToolRequest) <-chan struct{} {
	if req.Extra != nil && req.Extra.Header != nil {
		if id := req.Extra.Header.Get(headerPOST); id != "" {
			if ch, ok := p.posts.Load(id); ok {
				return ch.(chan struct{})
			}
		}
	}
	if req.Session == nil {
		return nil
	}
	p.mu.Lock()
	cn := p.sessions[req.Session.ID()]
	p.mu.Unlock()
	if cn == nil {
		return nil
	}
	return cn.closed
}
