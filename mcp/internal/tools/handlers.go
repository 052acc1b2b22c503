package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/lakegate/lakegate"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/query"
)

// typed binds fn, which takes In and returns Out, as a toolHandler.
func typed[In any, Out output](fn func(ctx context.Context, ts *Set, c call, in In) (Out, error)) toolHandler {
	return toolHandler{
		args: jsonFields(new(In)),
		run: func(ctx context.Context, ts *Set, c call, args json.RawMessage) (output, error) {
			var in In
			if p, ok := c.decodedArgs().(*In); ok {
				in = *p
			} else if err := c.args.decode(args, &in); err != nil {
				return nil, err
			}
			out, err := fn(ctx, ts, c, in)
			if err != nil {
				return nil, err
			}
			return out, nil
		},
	}
}

// handlers maps the handler names usable in tools.json to their code.
func handlers() map[string]toolHandler {
	return map[string]toolHandler{
		"list_databases":    typed(listDatabases),
		"list_tables":       typed(listTables),
		"describe_table":    typed(describeTable),
		"query":             typed(runQuery),
		"run_sql":           asking(typed(runSQL), runSQLFirst),
		"query_time_series": typed(runTimeSeries),
		"explain":           asking(typed(runExplain), confirmAnalyze),
		"get_result_block":  typed(getResultBlock),
		"job_status":        withoutWorker(typed(jobStatus)),
		// tail takes a worker for each look and its answer, none while
		// it waits.
		"tail":       withoutWorker(typed(runTail)),
		"cancel_job": withoutWorker(typed(cancelJob)),
		// sql runs an operator-declared statement; its code is made per
		// tool by sqlHandler.
		"sql": sqlHandler(nil),
	}
}

// asking gives h what it asks the person first (toolHandler.ask).
func asking(h toolHandler, ask func(ctx context.Context, ts *Set, c call, args json.RawMessage) (output, error)) toolHandler {
	h.ask = ask
	return h
}

// withoutWorker marks h as doing no database work (toolHandler.noWorker).
func withoutWorker(h toolHandler) toolHandler {
	h.noWorker = true
	return h
}

func handlerNames() []string {
	names := make([]string, 0, len(handlers()))
	for name := range handlers() {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
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

func (o databasesOut) result() (*mcpsdk.CallToolResult, int64, error) { return jsonResult(o) }

func listDatabases(_ context.Context, ts *Set, c call, _ noArgs) (databasesOut, error) {
	return databasesOut{Databases: DatabasesFor(ts.engine, c.Caller)}, nil
}

type tablesIn struct {
	Database string `json:"database"`
}

type tablesOut struct {
	Database string        `json:"database"`
	Tables   []query.Table `json:"tables"`
}

func (o tablesOut) result() (*mcpsdk.CallToolResult, int64, error) { return jsonResult(o) }

func listTables(ctx context.Context, ts *Set, c call, in tablesIn) (tablesOut, error) {
	tables, err := ts.engine.Tables(ctx, c.Caller, in.Database)
	return tablesOut{Database: in.Database, Tables: tables}, err
}

type describeIn struct {
	Database string `json:"database"`
	Table    string `json:"table"`
}

type tableOut struct{ *query.Table }

func (o tableOut) result() (*mcpsdk.CallToolResult, int64, error) { return jsonResult(o.Table) }

func describeTable(ctx context.Context, ts *Set, c call, in describeIn) (tableOut, error) {
	t, err := ts.engine.Describe(ctx, c.Caller, in.Database, in.Table)
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

func runQuery(ctx context.Context, ts *Set, c call, in queryIn) (output, error) {
	limit, f, chars, err := in.check()
	if err != nil {
		return nil, err
	}
	st, err := ts.engine.PrepareQuery(ctx, c.Caller, query.Request{
		Database: in.Database, Table: in.Table, Columns: in.Columns, Filters: in.Filters, Joins: in.Joins,
		GroupBy: in.GroupBy, Having: in.Having, OrderBy: in.OrderBy, Limit: limit, Offset: in.Offset, Cursor: in.Cursor, Fresh: in.Fresh || c.fresh,
	})
	if err != nil {
		return nil, err
	}
	return ts.result(ctx, c, st, f, in.Export, chars)
}

type sqlIn struct {
	Database string `json:"database"`
	SQL      string `json:"sql"`
	Params   []any  `json:"params"`
	Cursor   string `json:"cursor"`
	// Deliver "person" hands every row to the person behind the client as
	// a download link (elicit.go), where the client can open one.
	Deliver string `json:"deliver"`
	resultArgs
}

func runSQL(ctx context.Context, ts *Set, c call, in sqlIn) (output, error) {
	limit, f, chars, err := in.check()
	if err != nil {
		return nil, err
	}
	st, err := ts.engine.PrepareSQL(ctx, c.Caller, query.SQLRequest{Database: in.Database, SQL: in.SQL, Params: in.Params, Limit: limit, Cursor: in.Cursor, Fresh: in.Fresh || c.fresh})
	if err != nil {
		return nil, err
	}
	return ts.result(ctx, c, st, f, in.Export, chars)
}

// tailEngine is what tail needs of the engine beyond Engine.
type tailEngine interface {
	PrepareTail(ctx context.Context, c lakegate.Caller, r query.TailRequest) (*query.Stmt, error)
}

var _ tailEngine = (*query.Engine)(nil)

type tailIn struct {
	Database string         `json:"database"`
	Table    string         `json:"table"`
	Columns  []query.Select `json:"columns"`
	Filters  []query.Filter `json:"filters"`
	OrderBy  []string       `json:"order_by"`
	Cursor   string         `json:"cursor"`
	WaitS    float64        `json:"wait_s"`
	MaxRows  int            `json:"max_rows"`
}

// runTail answers the rows after the cursor (the newest without one),
// waiting up to wait_s for some: the wait holds no worker, each look and
// the answer take one.
func runTail(ctx context.Context, ts *Set, c call, in tailIn) (output, error) {
	te, ok := ts.engine.(tailEngine)
	if !ok {
		return nil, lakegate.Errorf(lakegate.KindUnavailable, "this server's engine has no tail")
	}
	if in.WaitS < 0 || in.WaitS > query.MaxTailWait.Seconds() {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("wait_s must be 0 to %.0f", query.MaxTailWait.Seconds())}
	}
	admit := ts.Admit
	st, err := te.PrepareTail(ctx, c.Caller, query.TailRequest{Database: in.Database, Table: in.Table, Columns: in.Columns,
		Filters: in.Filters, OrderBy: in.OrderBy, Cursor: in.Cursor, Limit: in.MaxRows,
		Wait:  time.Duration(in.WaitS * float64(time.Second)),
		Admit: admit})
	if err != nil {
		return nil, err
	}
	release, err := admit(ctx)
	if err != nil {
		return nil, err
	}
	c.worker = &worker{release: sync.OnceFunc(release)}
	defer c.worker.done() // unless a job took it
	return ts.result(ctx, c, st, query.FormatNDJSON, false, 0)
}

// analysisEngine is what query_time_series and explain need of the
// engine beyond Engine; *query.Engine has it.
type analysisEngine interface {
	PrepareTimeSeries(ctx context.Context, c lakegate.Caller, r query.TimeSeriesRequest) (*query.Stmt, error)
	Explain(ctx context.Context, c lakegate.Caller, db, sql string, analyze bool, format string) (*query.Plan, error)
}

var _ analysisEngine = (*query.Engine)(nil)

// analysis is e's time series and explain, when it has them.
func analysis(e Engine) (analysisEngine, error) {
	if ae, ok := e.(analysisEngine); ok {
		return ae, nil
	}
	return nil, lakegate.Errorf(lakegate.KindUnavailable, "this server's engine has no time series or explain")
}

type timeSeriesIn struct {
	Database   string         `json:"database"`
	Table      string         `json:"table"`
	TimeColumn string         `json:"time_column"`
	Bucket     query.Bucket   `json:"bucket"`
	MaxPoints  int            `json:"max_points"`
	Values     []string       `json:"values"`
	Aggregates []query.Select `json:"aggregates"`
	Fill       string         `json:"fill"`
	GroupBy    []string       `json:"group_by"`
	Start      string         `json:"start"`
	End        string         `json:"end"`
	Filters    []query.Filter `json:"filters"`
	Limit      int            `json:"limit"`
	Cursor     string         `json:"cursor"`
	Fresh      bool           `json:"fresh"`
}

func runTimeSeries(ctx context.Context, ts *Set, c call, in timeSeriesIn) (output, error) {
	ae, err := analysis(ts.engine)
	if err != nil {
		return nil, err
	}
	st, err := ae.PrepareTimeSeries(ctx, c.Caller, query.TimeSeriesRequest{
		Database: in.Database, Table: in.Table, TimeColumn: in.TimeColumn, Bucket: in.Bucket, MaxPoints: in.MaxPoints, Values: in.Values,
		Aggregates: in.Aggregates, Fill: in.Fill,
		GroupBy: in.GroupBy, Start: in.Start, End: in.End, Filters: in.Filters, Limit: in.Limit, Cursor: in.Cursor, Fresh: in.Fresh || c.fresh,
	})
	if err != nil {
		return nil, err
	}
	return ts.result(ctx, c, st, query.FormatNDJSON, false, 0)
}

type explainIn struct {
	Database string `json:"database"`
	SQL      string `json:"sql"`
	Analyze  bool   `json:"analyze"`
	Format   string `json:"format"`
}

// confirmAnalyze: EXPLAIN ANALYZE runs the query to its end, so the
// person confirms it.
func confirmAnalyze(ctx context.Context, ts *Set, c call, args json.RawMessage) (output, error) {
	var in explainIn
	if json.Unmarshal(args, &in) != nil || !in.Analyze {
		return nil, nil
	}
	return ts.confirm(ctx, c, fmt.Sprintf("Run EXPLAIN ANALYZE on %s? It runs the query to its end: %s", in.Database, clip(in.SQL, 300)))
}

type planOut struct{ *query.Plan }

func (o planOut) result() (*mcpsdk.CallToolResult, int64, error) { return jsonResult(o.Plan) }

func runExplain(ctx context.Context, ts *Set, c call, in explainIn) (planOut, error) {
	ae, err := analysis(ts.engine)
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
	return typed(func(ctx context.Context, ts *Set, c call, in map[string]any) (output, error) {
		var dialect query.Dialect
		for _, db := range ts.engine.Databases() {
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
		r.Fresh = c.fresh
		st, err := ts.engine.PrepareSQL(ctx, c.Caller, r)
		if err != nil {
			return nil, err
		}
		return ts.result(ctx, c, st, query.FormatNDJSON, false, 0)
	})
}

// getResultBlock is the get_result_block tool, for clients that cannot
// read resources: a window of rows (offset, limit) of a transfer, or one
// whole block (block), each within the answer budget.
type blockIn struct {
	TransferID string `json:"transfer_id"`
	Block      *int   `json:"block"`
	Offset     *int   `json:"offset"`
	Limit      *int   `json:"limit"`
}

func getResultBlock(ctx context.Context, ts *Set, c call, in blockIn) (output, error) {
	if in.Block == nil || in.Offset != nil || in.Limit != nil {
		offset, limit := 0, defaultWindowRows
		if in.Offset != nil {
			offset = *in.Offset
		}
		if in.Limit != nil {
			limit = *in.Limit
		}
		return ts.window(ctx, c.Caller, in.TransferID, offset, limit, ts.answers.chars)
	}
	data, m, err := ts.blocks.Read(ctx, c.Caller, in.TransferID, *in.Block)
	if err != nil {
		return nil, err
	}
	b := m.Blocks[*in.Block]
	return &blockText{TransferID: m.ID, Block: b.N, Blocks: len(m.Blocks), Format: m.Format, Size: b.Size, CRC32C: b.CRC32C, data: data}, nil
}

// blockText is get_result_block's result: the block's rows are the text
// content; the structured content describes it.
type blockText struct {
	TransferID string `json:"transfer_id"`
	Block      int    `json:"block"`
	Blocks     int    `json:"blocks"`
	Format     string `json:"format"`
	Size       int64  `json:"size"`
	CRC32C     string `json:"crc32c"`
	data       []byte
}

// result is the block's rows as text, its description as structured
// content.
func (b *blockText) result() (*mcpsdk.CallToolResult, int64, error) {
	meta, err := json.Marshal(b)
	if err != nil {
		return nil, 0, fmt.Errorf("encode tool result: %w", err)
	}
	return &mcpsdk.CallToolResult{
		Content:           []mcpsdk.Content{&mcpsdk.TextContent{Text: string(b.data)}},
		StructuredContent: json.RawMessage(meta),
	}, 0, nil
}
