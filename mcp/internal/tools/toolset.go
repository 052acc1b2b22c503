package tools

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/jobs"
	"github.com/lakegate/lakegate/mcp/internal/wire"
	"github.com/lakegate/lakegate/query"
)

// Set runs the declared tools' calls. It holds only what they need:
// the query engine, how answers are shaped, the block transfers results
// go on to, the sessions calls come on (reply budgets, a caller gone),
// the workers, and the calls' counts. It knows nothing of HTTP routing:
// the transports reach it through the protocol server only. Safe for
// concurrent use.
type Set struct {
	engine   Engine
	answers  answerOptions
	blocks   Blocks
	sessions Sessions
	workers  host.Workers
	observer host.Observer // may be nil
	log      *slog.Logger
	index    rowIndex       // rows of the blocks of recent transfers (window.go)
	jobs     *jobs.Registry // exports run as jobs (jobs.go); nil: none
	jobAfter time.Duration  // a query call running this long becomes a job
	asks     askOptions     // when an export asks the person (elicit.go)
	// downloads are the host's, lent after New (TakeDownloads): a
	// host.Downloads, or nothing.
	downloads atomic.Value
	// remoteJob reads another replica's job (Options.RemoteJob); nil: a
	// single server.
	remoteJob func(ctx context.Context, c lakegate.Caller, id string, wait time.Duration, cancel bool) (jobs.Status, bool, error)

	// declaredMu guards declared and roles, which a reload of tools.json
	// replaces (reload.go).
	declaredMu sync.RWMutex
	declared   []string            // the declared tools' names
	roles      map[string][]string // the roles of the tools declared with some

	statsMu sync.Mutex
	calls   map[string]*host.ToolStats
}

// answerOptions shape a query tool's answer (Options): the inline bound,
// the preview of a result sent to blocks, and whether there is a block
// store to send it to.
type answerOptions struct {
	threshold int64
	// chars is the answer budget (mcp_answer_chars): the most text a
	// model gets from one call.
	chars            int
	previewRows      int
	previewBytes     int64
	previewCellBytes int
	spill            bool
	noProfile        bool // Options.NoProfile
}

// Blocks is what the tools need of the block transfers (the plugin's
// block routes): read one block a caller may read, and start a transfer
// (wire.ErrNoBlockStore without a store).
type Blocks interface {
	Read(ctx context.Context, c lakegate.Caller, id string, n int) ([]byte, *blocktransport.Manifest, error)
	Create(owner, format string) (*blocktransport.Writer, error)
}

// Sessions is what the tools need of the sessions calls come on
// (transport.Sessions): the reply budget, the signal that a caller is
// gone, and each session's activity.
type Sessions interface {
	// AdmitReply reserves, before a request runs, the bytes its reply
	// may take on the session it came on: want if there is room, else at
	// least least; it returns what it reserved.
	AdmitReply(ctx context.Context, ss *mcpsdk.ServerSession, ex *mcpsdk.RequestExtra, want, least int64) (int64, error)
	// Gone is closed when the caller of req goes away (nil: nothing to
	// watch).
	Gone(req *mcpsdk.CallToolRequest) <-chan struct{}
	// Calling marks a call of session id in progress until done.
	Calling(id string) (done func(bytes int64))
}

// Options tune a Set; the plugin fills in every default (mcp.Options).
type Options struct {
	// Threshold bounds the rows held in memory for an inline answer
	// (mcp_block_threshold); AnswerChars the text of one answer.
	Threshold   int64
	AnswerChars int
	// PreviewRows, PreviewBytes and PreviewCellBytes bound the preview of
	// a result sent to blocks.
	PreviewRows      int
	PreviewBytes     int64
	PreviewCellBytes int
	// Spill says there is a block store for results past Threshold.
	Spill bool
	// NoProfile leaves out the profile of results that go to blocks.
	NoProfile bool
	// Workers is the host's pool tool calls run in; nil: a pool of
	// MaxWorkers slots of the Set's own, waiting at most WorkerWait.
	Workers    host.Workers
	MaxWorkers int
	WorkerWait time.Duration
	// Observer, if set, receives tool calls.
	Observer host.Observer
	// Logger; nil discards.
	Logger *slog.Logger
	// Jobs runs exports apart from their calls; nil: an export answers
	// when its rows are written.
	Jobs *jobs.Registry
	// JobAfter turns a query call still running after it into a job (0:
	// never).
	JobAfter time.Duration
	// ConfirmExportBytes and ElicitDownloadBytes: a run_sql export the
	// planner puts past them is confirmed by the person first, or goes to
	// the person as a download link (elicit.go; 0: never).
	ConfirmExportBytes  int64
	ElicitDownloadBytes int64
	// RemoteJob, in a cluster, reads a job another replica runs, waiting
	// up to wait for its end, or cancels it there; ok false when id is
	// this replica's.
	RemoteJob func(ctx context.Context, c lakegate.Caller, id string, wait time.Duration, cancel bool) (st jobs.Status, ok bool, err error)
}

// New makes the Set that runs tool calls on engine, sending large
// results to blocks and admitting calls on sessions. It starts nothing.
func New(engine Engine, blocks Blocks, sessions Sessions, opts *Options) *Set {
	var o Options
	if opts != nil {
		o = *opts
	}
	ts := &Set{
		engine: engine,
		answers: answerOptions{threshold: o.Threshold, chars: o.AnswerChars, previewRows: o.PreviewRows, previewBytes: o.PreviewBytes,
			previewCellBytes: o.PreviewCellBytes, spill: o.Spill, noProfile: o.NoProfile},
		blocks:    blocks,
		sessions:  sessions,
		workers:   o.Workers,
		observer:  o.Observer,
		log:       o.Logger,
		jobs:      o.Jobs,
		jobAfter:  o.JobAfter,
		asks:      askOptions{confirmExport: o.ConfirmExportBytes, downloadExport: o.ElicitDownloadBytes},
		remoteJob: o.RemoteJob,
		calls:     map[string]*host.ToolStats{},
	}
	if ts.log == nil {
		ts.log = slog.New(slog.DiscardHandler)
	}
	if ts.workers == nil {
		ts.workers = newLocalWorkers(o.MaxWorkers, o.WorkerWait)
	}
	return ts
}

// Handler is what serves the calls of the declared tool t: its handler
// with the protocol's side channels (progress, a log line a call).
func (ts *Set) Handler(t Spec) mcpsdk.ToolHandler { return observe(t.Name, ts.handle(t.run())) }

// TakeDownloads lends the Set the host's downloads (run_sql's deliver).
func (ts *Set) TakeDownloads(d host.Downloads) { ts.downloads.Store(d) }

// WorkerUse reports the use of the workers tool calls run in.
func (ts *Set) WorkerUse() host.WorkerStatus { return ts.workers.Use() }

// Names lists the declared tools, sorted.
func (ts *Set) Names() []string {
	ts.declaredMu.RLock()
	defer ts.declaredMu.RUnlock()
	return slices.Sorted(slices.Values(ts.declared))
}

// RolesOf is the roles tool name is declared for (none: anyone).
func (ts *Set) RolesOf(name string) []string {
	ts.declaredMu.RLock()
	defer ts.declaredMu.RUnlock()
	return ts.roles[name]
}

// Declare records the declared tools: their names, and the roles of those
// declared with some.
func (ts *Set) Declare(specs []Spec) {
	names := make([]string, 0, len(specs))
	roles := map[string][]string{}
	for _, t := range specs {
		names = append(names, t.Name)
		if len(t.Roles) > 0 {
			roles[t.Name] = t.Roles
		}
	}
	ts.declaredMu.Lock()
	defer ts.declaredMu.Unlock()
	ts.declared, ts.roles = names, roles
}

// Stats is a copy of the calls' counts, by tool.
func (ts *Set) Stats() map[string]host.ToolStats {
	ts.statsMu.Lock()
	defer ts.statsMu.Unlock()
	out := make(map[string]host.ToolStats, len(ts.calls))
	for name, s := range ts.calls {
		out[name] = *s
	}
	return out
}

// handle adapts a declared tool to the SDK: it takes a worker slot, runs
// the handler and renders the result or the error as a tool result.
func (ts *Set) handle(t tool) mcpsdk.ToolHandler {
	h := t.handler
	return func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		start := time.Now()
		caller, _ := lakegate.CallerFrom(ctx)
		// In progress on its session until it returns, counted with the
		// bytes of its result.
		var resultBytes int64
		if req.Session != nil && req.Session.ID() != "" {
			finish := ts.sessions.Calling(req.Session.ID())
			defer func() { finish(resultBytes) }()
		}
		ctx, stop := ts.untilCallerGone(ctx, req)
		defer stop()
		c := call{Caller: caller, timeout: t.timeout, fresh: t.fresh, args: t.args, decoded: new(any), tool: t.name,
			session: req.Session, inputs: req.Params.InputResponses, state: req.Params.RequestState, tasks: TakesTasks(req),
			noProfile: req.Params.GetMeta()[wire.ProfileMetaKey] == false}
		// First what the person is asked (elicit.go), which may answer the
		// call: it holds no reply bytes and no worker while they decide.
		out, err := ts.ask(ctx, t, c, req.Params.Arguments)
		if out == nil && err == nil {
			// Admitted by the bytes its reply can take before it runs,
			// then given a worker: a call waiting for bytes holds no
			// worker. On a session whose client is slow to read, the
			// inline bound shrinks to what its budget has room for (a
			// larger result goes to blocks).
			want, least := ts.callReplyBounds(req)
			var reserved int64
			reserved, err = ts.sessions.AdmitReply(ctx, req.Session, req.GetExtra(), want, least)
			c.inline = ts.inlineBound(reserved, len(req.Params.Arguments))
			if err == nil && !h.noWorker {
				c.worker, err = ts.acquire(ctx)
			}
			if err == nil {
				out, err = h.run(ctx, ts, c, req.Params.Arguments)
				c.worker.done()
			}
		}
		var res *mcpsdk.CallToolResult
		var rows int64
		if err == nil {
			res, rows, err = out.result()
		}
		if err == nil && res.InputRequests != nil {
			return res, nil // a question for the person: the call comes back
		}
		if err == nil {
			clampText(res, ts.answers.chars)
		}
		ts.count(t.name, err != nil)
		d := time.Since(start)
		resultBytes = ts.observeCall(t.name, d, rows, res, err)
		log := ts.log.With(wire.CallLog(req, []any{lakegate.LogTool, t.name, lakegate.LogSubject, caller.Subject, lakegate.LogDuration, d.Milliseconds()})...)
		if err != nil {
			level := slog.LevelInfo
			if errors.Is(err, wire.ErrBlockStorage) {
				level = slog.LevelError // the operator's to fix, not the caller's
			}
			log.Log(ctx, level, "tool call failed", "kind", string(lakegate.KindOf(err)), "error", err.Error())
			return wire.ErrorResult(err), nil
		}
		log.InfoContext(ctx, "tool call")
		return res, nil
	}
}

// untilCallerGone returns ctx cancelled also when the client that made
// the call goes away: its legacy SSE session closes (the client left or
// stopped reading), or the Streamable HTTP POST that carries the call ends
// before its answer (the client disconnected). Nothing more is then
// produced for nobody, and the query stops in the database. stop releases
// the watch.
func (ts *Set) untilCallerGone(ctx context.Context, req *mcpsdk.CallToolRequest) (context.Context, func()) {
	gone := ts.sessions.Gone(req)
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

// observeCall reports a finished tool call to the Observer, if any, and
// returns the bytes of its result.
func (ts *Set) observeCall(tool string, d time.Duration, rows int64, res *mcpsdk.CallToolResult, err error) int64 {
	tc := host.ToolCall{Tool: tool, Outcome: "ok", Duration: d}
	if err != nil {
		tc.Outcome = string(lakegate.NewErrorBody(err).Kind)
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
	if ts.observer != nil {
		ts.observer.ToolCall(tc)
	}
	return tc.Bytes
}

// replyCopies is how many times its inline bound building a reply may
// hold at once: its rows, their CSV text, the SDK's JSON of the result,
// and their garbage. Measured on make chaos's slow SSE reader (100 × 9 MB
// run_sql, nothing read): with 3 the server's peak grew by 124–136 MiB,
// with 4 by 111–117 MiB (three runs each).
const replyCopies = 4

// minInline is the smallest inline bound a call on a busy session runs
// with: a result past it goes to blocks, and its reply is a preview.
const minInline = 256 << 10

// callReplyBounds are the bytes tool call req reserves while it runs
// (admitReply), its arguments (which the reply may echo) included. With
// a block store: up to replyCopies times the inline bound
// (mcp_block_threshold, past which a result goes to blocks), and at
// least replyCopies times minInline; a call granted less runs with a
// smaller inline bound (inlineBound). Without one a result cannot go
// elsewhere: the threshold, once. Once queued, a reply holds only its
// actual size.
func (ts *Set) callReplyBounds(req *mcpsdk.CallToolRequest) (want, least int64) {
	args := int64(len(req.Params.Arguments))
	if !ts.answers.spill {
		return ts.answers.threshold + args, ts.answers.threshold + args
	}
	return replyCopies*ts.answers.threshold + args, replyCopies*min(minInline, ts.answers.threshold) + args
}

// inlineBound is the inline bound of a call granted reserved bytes by
// admitReply for a request of args bytes of arguments: the threshold
// without a block store, else what replyCopies copies fit in.
func (ts *Set) inlineBound(reserved int64, args int) int64 {
	if !ts.answers.spill {
		return ts.answers.threshold
	}
	return min(ts.answers.threshold, max(1, (reserved-int64(args))/replyCopies))
}

// answer runs st for a tool call through query's one decision (Stmt.Auto):
// rows that fit the answer budget (chars, at most mcp_answer_chars; 0: that
// setting) are answered inline; past it they go on into a block transfer in
// format f, only a preview stays in memory, and the answer shows the rows
// that fit. export sends every result to blocks. Without a block store
// rows are held up to mcp_block_threshold and the answer is cut to the
// budget, continued by next_cursor.
func (ts *Set) answer(ctx context.Context, c call, st *query.Stmt, f query.Format, export bool, chars int) (*answer, error) {
	if c.timeout > 0 {
		st = st.WithTimeout(c.timeout)
	}
	chars = min(cmp.Or(chars, ts.answers.chars), ts.answers.chars)
	inline := cmp.Or(c.inline, ts.answers.threshold)
	if ts.answers.spill {
		inline = min(inline, int64(chars))
	}
	prog := &query.Progress{}
	reportRows(ctx, prog)
	var meter *jobMeter
	if c.watch != nil {
		meter = &jobMeter{Progress: prog}
		c.watch(meter)
	}
	var sp *blockSpill
	res, err := st.Auto(ctx, query.AutoOptions{
		InlineBytes:      inline,
		PreviewRows:      ts.answers.previewRows,
		PreviewBytes:     min(ts.answers.previewBytes, int64(chars)),
		PreviewCellBytes: ts.answers.previewCellBytes,
		Always:           export,
		Progress:         prog,
		Open: func() (query.Spill, error) {
			var err error
			sp, err = ts.openSpill(ctx, c.Subject, f)
			if sp != nil {
				sp.profiled = !ts.answers.noProfile && !c.noProfile
				if meter != nil {
					meter.transfer.Store(sp.w.ID())
					c.watch(meter) // a waiting job_status answers with it
				}
			}
			return sp, err
		},
	})
	if err != nil {
		return nil, err
	}
	a := &answer{AutoResult: res, cellBytes: ts.answers.previewCellBytes, chars: chars, stmt: st}
	if res.Mode == query.ModeSpill {
		a.transfer = sp.manifest
		if sp.profile != nil {
			a.profile = sp.profile.Columns()
		}
	}
	return a, nil
}

// openSpill starts a transfer for owner in format f, and its span in ctx.
func (ts *Set) openSpill(ctx context.Context, owner string, f query.Format) (*blockSpill, error) {
	w, err := ts.blocks.Create(owner, string(f))
	if errors.Is(err, wire.ErrNoBlockStore) {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation,
			Message: fmt.Sprintf("the result is over %d bytes and this server has no block store", ts.answers.threshold),
			Hint:    "ask for fewer rows (max_rows) or columns"}
	}
	if err != nil {
		return nil, err
	}
	enc, err := query.NewEncoder(f, blockWriter{w})
	if err != nil {
		w.Abort()
		return nil, err
	}
	return &blockSpill{Encoder: enc, w: w, span: startBlockWrite(ctx, string(f))}, nil
}

func (ts *Set) count(tool string, failed bool) {
	ts.statsMu.Lock()
	defer ts.statsMu.Unlock()
	s := ts.calls[tool]
	if s == nil {
		s = &host.ToolStats{}
		ts.calls[tool] = s
	}
	s.Calls++
	if failed {
		s.Errors++
	}
}
