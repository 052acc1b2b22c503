package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/lakegate/lakegate"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/query"
)

// A toolHandler runs one tool's calls. Its arguments are checked against
// the tool's input schema and decoded once into the handler's input type
// (typed); its output renders itself as the tool result.
type toolHandler struct {
	run func(ctx context.Context, p *Plugin, c call, args json.RawMessage) (output, error)
	// args are the arguments the input type has; nil: any (a map).
	args []string
}

// typed binds fn, which takes In and returns Out, as a toolHandler.
func typed[In any, Out output](fn func(ctx context.Context, p *Plugin, c call, in In) (Out, error)) toolHandler {
	return toolHandler{
		args: jsonFields(new(In)),
		run: func(ctx context.Context, p *Plugin, c call, args json.RawMessage) (output, error) {
			var in In
			if err := c.args.decode(args, &in); err != nil {
				return nil, err
			}
			out, err := fn(ctx, p, c, in)
			if err != nil {
				return nil, err
			}
			return out, nil
		},
	}
}

// output is a tool's result: it renders itself as the tool result, and
// says how many rows it holds (for the Observer).
type output interface {
	result(p *Plugin) (res *mcpsdk.CallToolResult, rows int64, err error)
}

// call is who calls a tool, the tool's own statement timeout (zero: the
// engine's) and its arguments' schema.
type call struct {
	lakegate.Caller
	timeout time.Duration
	args    *argsSchema
	// inline bounds the bytes of an inline answer (at most
	// mcp_block_threshold; less on a session slow to read its replies).
	inline int64
}

// handlers maps the handler names usable in tools.json to their code.
func handlers() map[string]toolHandler {
	return map[string]toolHandler{
		"list_databases":    typed(listDatabases),
		"list_tables":       typed(listTables),
		"describe_table":    typed(describeTable),
		"query":             typed(runQuery),
		"run_sql":           typed(runSQL),
		"query_time_series": typed(runTimeSeries),
		"explain":           typed(runExplain),
		"get_result_block":  typed(getResultBlock),
		// sql runs an operator-declared statement; its code is made per
		// tool by sqlHandler.
		"sql": sqlHandler(nil),
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
	h := handlers()[t.Handler]
	if t.sqlTool != nil {
		h = sqlHandler(t.sqlTool)
	}
	return func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		start := time.Now()
		caller, _ := lakegate.CallerFrom(ctx)
		ctx, stop := p.untilCallerGone(ctx, req)
		defer stop()
		var out output
		// Admitted by the bytes its reply can take before it runs, then
		// given a worker: a call waiting for bytes holds no worker.
		// On a session whose client is slow to read, the inline bound
		// shrinks to what its budget has room for (a larger result goes
		// to blocks).
		want, least := p.callReplyBounds(req)
		reserved, err := p.sessions.admitReply(ctx, req.Session, req.GetExtra(), want, least)
		if err == nil {
			c := call{Caller: caller, timeout: t.timeout, args: t.args, inline: p.inlineBound(reserved, len(req.Params.Arguments))}
			err = p.withWorker(ctx, func() (err error) {
				out, err = h.run(ctx, p, c, req.Params.Arguments)
				return err
			})
		}
		var res *mcpsdk.CallToolResult
		var rows int64
		if err == nil {
			res, rows, err = out.result(p)
		}
		p.count(t.Name, err != nil)
		d := time.Since(start)
		p.observeCall(req, t.Name, d, rows, res, err)
		log := p.log.With(callLog(req, []any{lakegate.LogTool, t.Name, lakegate.LogSubject, caller.Subject, lakegate.LogDuration, d.Milliseconds()})...)
		if err != nil {
			level := slog.LevelInfo
			if errors.Is(err, errBlockStorage) {
				level = slog.LevelError // the operator's to fix, not the caller's
			}
			log.Log(ctx, level, "tool call failed", "kind", string(lakegate.KindOf(err)), "error", err.Error())
			return errorResult(err), nil
		}
		log.InfoContext(ctx, "tool call")
		return res, nil
	}
}

// withWorker runs fn holding a slot of p.workers: the host's shared pool,
// which also applies its per-subject limits, or the plugin's own.
func (p *Plugin) withWorker(ctx context.Context, fn func() error) error {
	release, err := p.workers.Acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return fn()
}

// jsonResult is a result whose structured content is v and whose text is
// the same JSON.
func jsonResult(v any) (*mcpsdk.CallToolResult, int64, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, 0, fmt.Errorf("encode tool result: %w", err)
	}
	return &mcpsdk.CallToolResult{
		Content:           []mcpsdk.Content{&mcpsdk.TextContent{Text: string(data)}},
		StructuredContent: json.RawMessage(data),
	}, 0, nil
}

type noArgs struct{}

type databasesOut struct {
	Databases []query.Database `json:"databases"`
}

func (o databasesOut) result(*Plugin) (*mcpsdk.CallToolResult, int64, error) { return jsonResult(o) }

func listDatabases(_ context.Context, p *Plugin, c call, _ noArgs) (databasesOut, error) {
	return databasesOut{Databases: p.databasesFor(c.Caller)}, nil
}

type tablesIn struct {
	Database string `json:"database"`
}

type tablesOut struct {
	Database string        `json:"database"`
	Tables   []query.Table `json:"tables"`
}

func (o tablesOut) result(*Plugin) (*mcpsdk.CallToolResult, int64, error) { return jsonResult(o) }

func listTables(ctx context.Context, p *Plugin, c call, in tablesIn) (tablesOut, error) {
	tables, err := p.engine.Tables(ctx, c.Caller, in.Database)
	return tablesOut{Database: in.Database, Tables: tables}, err
}

type describeIn struct {
	Database string `json:"database"`
	Table    string `json:"table"`
}

type tableOut struct{ *query.Table }

func (o tableOut) result(*Plugin) (*mcpsdk.CallToolResult, int64, error) { return jsonResult(o.Table) }

func describeTable(ctx context.Context, p *Plugin, c call, in describeIn) (tableOut, error) {
	t, err := p.engine.Describe(ctx, c.Caller, in.Database, in.Table)
	return tableOut{t}, err
}

// queryIn is the query tool's input: a structured query (query.Request,
// less its REST-only limit) and where its result goes.
type queryIn struct {
	Database string         `json:"database"`
	Table    string         `json:"table"`
	Columns  []query.Select `json:"columns"`
	Filters  []query.Filter `json:"filters"`
	Joins    []query.Join   `json:"joins"`
	GroupBy  []string       `json:"group_by"`
	Having   []query.Filter `json:"having"`
	OrderBy  []query.Order  `json:"order_by"`
	Offset   int            `json:"offset"`
	Cursor   string         `json:"cursor"`
	resultArgs
}

func runQuery(ctx context.Context, p *Plugin, c call, in queryIn) (*answer, error) {
	limit, f, err := in.check()
	if err != nil {
		return nil, err
	}
	st, err := p.engine.PrepareQuery(ctx, c.Caller, query.Request{
		Database: in.Database, Table: in.Table, Columns: in.Columns, Filters: in.Filters, Joins: in.Joins,
		GroupBy: in.GroupBy, Having: in.Having, OrderBy: in.OrderBy, Limit: limit, Offset: in.Offset, Cursor: in.Cursor,
	})
	if err != nil {
		return nil, err
	}
	return p.answer(ctx, c, st, f, in.Export)
}

type sqlIn struct {
	Database string `json:"database"`
	SQL      string `json:"sql"`
	Params   []any  `json:"params"`
	Cursor   string `json:"cursor"`
	resultArgs
}

func runSQL(ctx context.Context, p *Plugin, c call, in sqlIn) (*answer, error) {
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

type timeSeriesIn struct {
	Database   string         `json:"database"`
	Table      string         `json:"table"`
	TimeColumn string         `json:"time_column"`
	Bucket     query.Bucket   `json:"bucket"`
	Aggregates []query.Select `json:"aggregates"`
	GroupBy    []string       `json:"group_by"`
	Start      string         `json:"start"`
	End        string         `json:"end"`
	Filters    []query.Filter `json:"filters"`
	Limit      int            `json:"limit"`
	Cursor     string         `json:"cursor"`
}

func runTimeSeries(ctx context.Context, p *Plugin, c call, in timeSeriesIn) (*answer, error) {
	ae, err := p.analysis()
	if err != nil {
		return nil, err
	}
	st, err := ae.PrepareTimeSeries(ctx, c.Caller, query.TimeSeriesRequest{
		Database: in.Database, Table: in.Table, TimeColumn: in.TimeColumn, Bucket: in.Bucket, Aggregates: in.Aggregates,
		GroupBy: in.GroupBy, Start: in.Start, End: in.End, Filters: in.Filters, Limit: in.Limit, Cursor: in.Cursor,
	})
	if err != nil {
		return nil, err
	}
	return p.answer(ctx, c, st, query.FormatNDJSON, false)
}

type explainIn struct {
	Database string `json:"database"`
	SQL      string `json:"sql"`
	Analyze  bool   `json:"analyze"`
	Format   string `json:"format"`
}

type planOut struct{ *query.Plan }

func (o planOut) result(*Plugin) (*mcpsdk.CallToolResult, int64, error) { return jsonResult(o.Plan) }

func runExplain(ctx context.Context, p *Plugin, c call, in explainIn) (planOut, error) {
	ae, err := p.analysis()
	if err != nil {
		return planOut{}, err
	}
	plan, err := ae.Explain(ctx, c.Caller, in.Database, in.SQL, in.Analyze, in.Format)
	return planOut{plan}, err
}

// sqlHandler runs an operator-declared statement: the arguments are
// checked against its typed parameters and bound in declared order, and
// the statement runs like run_sql (validated, read-only, timeout, row cap).
func sqlHandler(tool *query.SQLTool) toolHandler {
	return typed(func(ctx context.Context, p *Plugin, c call, in map[string]any) (*answer, error) {
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
	})
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
	gone := p.sessions.gone(req)
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

// observeCall counts a finished tool call on its session and reports it
// to the Observer, if any.
func (p *Plugin) observeCall(req *mcpsdk.CallToolRequest, tool string, d time.Duration, rows int64, res *mcpsdk.CallToolResult, err error) {
	tc := ToolCall{Tool: tool, Outcome: "ok", Duration: d}
	if err != nil {
		tc.Outcome = string(NewErrorBody(err).Kind)
	} else {
		tc.Rows = rows
		for _, c := range res.Content {
			if t, ok := c.(*mcpsdk.TextContent); ok {
				tc.Bytes += int64(len(t.Text))
			}
		}
		if raw, ok := res.StructuredContent.(json.RawMessage); ok {
			tc.Bytes += int64(len(raw))
		}
	}
	if req.Session != nil && req.Session.ID() != "" {
		p.sessions.called(req.Session.ID(), tc.Bytes)
	}
	if p.opts.Observer != nil {
		p.opts.Observer.ToolCall(tc)
	}
}

// getResultBlock is the get_result_block tool, for clients that cannot
// read resources.
type blockIn struct {
	TransferID string `json:"transfer_id"`
	Block      int    `json:"block"`
}

func getResultBlock(ctx context.Context, p *Plugin, c call, in blockIn) (*blockText, error) {
	data, m, err := p.blocks.read(ctx, c.Caller, in.TransferID, in.Block)
	if err != nil {
		return nil, err
	}
	b := m.Blocks[in.Block]
	return &blockText{TransferID: m.ID, Block: b.N, Blocks: len(m.Blocks), Format: m.Format, Size: b.Size, SHA256: b.SHA256, data: data}, nil
}

// blockText is get_result_block's result: the block's rows are the text
// content; the structured content describes it.
type blockText struct {
	TransferID string `json:"transfer_id"`
	Block      int    `json:"block"`
	Blocks     int    `json:"blocks"`
	Format     string `json:"format"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	data       []byte
}

// result is the block's rows as text, its description as structured
// content.
func (b *blockText) result(*Plugin) (*mcpsdk.CallToolResult, int64, error) {
	meta, err := json.Marshal(b)
	if err != nil {
		return nil, 0, fmt.Errorf("encode tool result: %w", err)
	}
	return &mcpsdk.CallToolResult{
		Content:           []mcpsdk.Content{&mcpsdk.TextContent{Text: string(b.data)}},
		StructuredContent: json.RawMessage(meta),
	}, 0, nil
}
