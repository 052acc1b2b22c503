package tools

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/jobs"
	"github.com/lakegate/lakegate/mcp/internal/wire"
	"github.com/lakegate/lakegate/query"
)

// Long work runs as a job: the call answers at once with the job's id,
// and the work goes on under the job's own timeout (job_timeout, not
// statement_timeout), on the worker the call took, whether or not the
// session that asked is still there. An export is a job from the start
// (its rows go to a block transfer); any other query call becomes one
// when it has run for mcp_job_after without an answer, by the server's
// own clock. The agent follows a job with job_status (a wait of up to
// maxJobWait, so that it polls rarely) and stops it with cancel_job; done,
// job_status answers what the call would have answered inline.

// jobLineRoom is what a job's answer keeps for the lines it puts above
// the call's own answer.
const jobLineRoom = 400

// maxJobWait bounds job_status's wait: under the minute MCP clients give
// a call, with room to spare.
const maxJobWait = 25 * time.Second

// result answers st: as an export job when export asks for blocks; inline
// when the server runs no jobs; else inline if it ends within
// mcp_job_after, and as a job from then on.
func (ts *Set) result(ctx context.Context, c call, st *query.Stmt, f query.Format, export bool, chars int) (output, error) {
	if watch, ok := ctx.Value(inJobKey{}).(func(jobs.Meter)); ok {
		// The call is a job's own run (a task): it runs here to its end,
		// under the job's timeout.
		c.watch = watch
		if ts.jobs != nil {
			c.timeout = ts.jobs.Timeout()
		}
		return ts.answer(ctx, c, st, f, export, chars)
	}
	if c.timeout > 0 {
		st = st.WithTimeout(c.timeout)
	}
	held := !export && ts.jobAfter > 0 && ts.jobAfter < st.Timeout()
	if ts.jobs == nil || !export && !held {
		return ts.answer(ctx, c, st, f, export, chars)
	}
	jc := c
	jc.timeout = ts.jobs.Timeout()
	// Room in the answer for the job's line above it, so that the job's
	// answer keeps the call's footer (its cursor) within the budget.
	chars = min(cmp.Or(chars, ts.answers.chars), ts.answers.chars) - jobLineRoom
	release := c.worker.keep() // once: the run releases it at its end
	run := func(ctx context.Context, watch func(jobs.Meter)) (any, error) {
		defer release()
		jc.watch = watch
		start := time.Now()
		a, err := ts.answer(ctx, jc, st, f, export, chars)
		if !held || time.Since(start) >= ts.jobAfter {
			logJob(ctx, ts.log.With(lakegate.LogTool, c.tool, lakegate.LogSubject, c.Subject, lakegate.LogDuration, time.Since(start).Milliseconds()), a, err)
		}
		if err != nil {
			return nil, err
		}
		res, rows, err := a.result()
		if err != nil {
			return nil, err
		}
		return doneResult{res, rows}, nil
	}
	if !held {
		// The call took the caller's rate-limit token: the job takes none.
		status, err := ts.jobs.Start(host.WithPaid(ctx), c.Subject, c.tool, run)
		if err != nil {
			release()
			return nil, err
		}
		return jobOut{Status: status, started: true, task: c.tasks}, nil
	}
	res, status, shown, err := ts.jobs.Hold(host.WithPaid(ctx), c.Subject, c.tool, ts.jobAfter, run)
	if err != nil {
		release() // when the run never started (a closing registry)
		return nil, err
	}
	if shown {
		return jobOut{Status: status, started: true, after: ts.jobAfter, task: c.tasks}, nil
	}
	out, ok := res.(doneResult)
	if !ok {
		return nil, lakegate.Errorf(lakegate.KindInternal, "the call ended without an answer")
	}
	return out, nil
}

// jobMeter is a job's progress: the query's rows and bytes, and once its
// rows go to blocks the transfer they go to (jobs.TransferMeter).
type jobMeter struct {
	*query.Progress
	transfer atomic.Value // string
}

// Transfer is the transfer the job writes; "" before it has one.
func (m *jobMeter) Transfer() string {
	id, _ := m.transfer.Load().(string)
	return id
}

// logJob logs a job's end.
func logJob(ctx context.Context, log *slog.Logger, a *answer, err error) {
	if err != nil {
		level := slog.LevelInfo
		if errors.Is(err, wire.ErrBlockStorage) {
			level = slog.LevelError // the operator's to fix, not the caller's
		}
		log.Log(ctx, level, "job failed", "kind", string(lakegate.KindOf(err)), "error", err.Error())
		return
	}
	log.Info("job done", "rows", a.RowCount)
}

// inJobKey marks the context of a tool call that is a job's own run.
type inJobKey struct{}

// InJob marks ctx as a job's own run of a tool call (a task of the MCP
// Tasks extension): its query runs to its end under the job's timeout,
// neither held nor started as another job, and watch is given its meter.
func InJob(ctx context.Context, watch func(jobs.Meter)) context.Context {
	return context.WithValue(ctx, inJobKey{}, watch)
}

// ToolResult is a done job's answer as a tool result (the Tasks
// extension's tasks/result).
func (d doneResult) ToolResult() *mcpsdk.CallToolResult { return d.res }

// doneResult is a done job's answer, kept with it: the text and links a
// model reads, and as JSON the structured content.
type doneResult struct {
	res  *mcpsdk.CallToolResult
	rows int64
}

// result is the answer of a call that ended before it became a job.
func (d doneResult) result() (*mcpsdk.CallToolResult, int64, error) { return d.res, d.rows, nil }

func (e doneResult) MarshalJSON() ([]byte, error) {
	if e.res == nil || e.res.StructuredContent == nil {
		return []byte("null"), nil
	}
	return json.Marshal(e.res.StructuredContent)
}

// jobOut is a job's status as a tool answer: a line or two for the model
// and, structured, the status in a result's shape (mode "job").
type jobOut struct {
	jobs.Status
	started bool          // the answer of the call that started it
	after   time.Duration // started: the call ran this long first (0: an export)
	task    bool          // started, for a client of tasks: answered as its task
}

func (o jobOut) result() (*mcpsdk.CallToolResult, int64, error) {
	var b strings.Builder
	st := o.Status
	took := time.Since(st.Created)
	if st.Ended != nil {
		took = st.Ended.Sub(st.Created)
	}
	took = took.Round(100 * time.Millisecond)
	switch {
	case o.started && o.after > 0 && st.State == jobs.Running:
		fmt.Fprintf(&b, "The call ran past %v, so it goes on as job %s (%s): its answer comes with the job's end.\n", o.after, st.ID, st.Tool)
	case o.started && st.State == jobs.Running:
		fmt.Fprintf(&b, "Started job %s (%s export): the rows go to a block transfer; nothing is answered inline.\n", st.ID, st.Tool)
	case st.State == jobs.Running:
		fmt.Fprintf(&b, "Job %s (%s) is running: %v so far, %d rows, %d bytes written.\n", st.ID, st.Tool, took, st.Rows, st.Bytes)
	default:
		fmt.Fprintf(&b, "Job %s (%s) %s after %v: %d rows, %d bytes.\n", st.ID, st.Tool, st.State, took, st.Rows, st.Bytes)
	}
	var content []mcpsdk.Content
	switch st.State {
	case jobs.Running:
		if st.Transfer != "" {
			fmt.Fprintf(&b, "Its rows go to transfer %s, whose blocks can be read as they are written (get_result_block).\n", st.Transfer)
		}
		fmt.Fprintf(&b, "Call job_status with job_id %q and wait_s %d to wait for its end (it answers at once when the job ends); cancel_job stops it.", st.ID, int(maxJobWait.Seconds()))
	case jobs.Done:
		// The export's answer, under the job's line (a job of another
		// replica: where its result is).
		if r, ok := st.Result.(map[string]any); ok {
			if tr, ok := r["transfer"].(map[string]any); ok {
				fmt.Fprintf(&b, "Its rows are in transfer %v (%v rows, %v blocks); read them with get_result_block.", tr["transfer_id"], tr["rows"], len(anySlice(tr["blocks"])))
			}
		}
		if r, ok := st.Result.(doneResult); ok && r.res != nil && len(r.res.Content) > 0 {
			if text, ok := r.res.Content[0].(*mcpsdk.TextContent); ok {
				b.WriteString(text.Text)
				content = r.res.Content[1:]
			} else {
				content = r.res.Content
			}
		}
	case jobs.Failed, jobs.Cancelled:
		if st.Error != nil {
			b.WriteString(st.Error.Message)
			if st.Error.Hint != "" {
				b.WriteString(" (" + st.Error.Hint + ")")
			}
		}
	case jobs.Expired:
		b.WriteString("Its result has expired, and its transfer is deleted: run the export again.")
	}
	data, err := json.Marshal(statusMeta{Columns: []query.ResultColumn{}, Mode: modeJob, Job: &st})
	if err != nil {
		return nil, 0, fmt.Errorf("encode tool result: %w", err)
	}
	// Done: the export's own structured answer (kept here, or read from
	// the replica that ran it), with the job.
	var done any
	switch r := st.Result.(type) {
	case doneResult:
		if r.res != nil {
			done = r.res.StructuredContent
		}
	case map[string]any:
		done = r
	}
	if st.State == jobs.Done && done != nil {
		if data, err = withJob(done, st); err != nil {
			return nil, 0, err
		}
	}
	res := &mcpsdk.CallToolResult{
		Content:           append([]mcpsdk.Content{&mcpsdk.TextContent{Text: b.String()}}, content...),
		StructuredContent: json.RawMessage(data),
	}
	if o.task && o.started {
		res.Meta = mcpsdk.Meta{TaskMetaKey: st.ID}
	}
	return res, st.Rows, nil
}

// TaskMetaKey marks, in a tool result's _meta, the answer of a call that
// became job (the value: its id) for a client that takes the Tasks
// extension: the transport answers the call with the task instead.
const TaskMetaKey = "lakegate/task"

// tasksExtension names the Tasks extension of the 2026-07-28 revision.
const tasksExtension = "io.modelcontextprotocol/tasks"

// TakesTasks reports whether the client of req declares the Tasks
// extension of the 2026-07-28 revision (SEP-2663) with the request: a
// call of its that becomes a job may then be answered as a task.
func TakesTasks(req *mcpsdk.CallToolRequest) bool {
	if req == nil || req.Params == nil || req.ProtocolVersion() < "2026-07-28" {
		return false
	}
	// The capabilities as the request's _meta carries them, decoded: read
	// in place. The SDK's ClientCapabilities would encode and decode them
	// again on every call (32 KB of decoder buffer).
	if raw, ok := req.Params.GetMeta()[mcpsdk.MetaKeyClientCapabilities].(map[string]any); ok {
		ext, _ := raw["extensions"].(map[string]any)
		_, ok := ext[tasksExtension]
		return ok
	}
	caps := req.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[tasksExtension]
	return ok
}

// modeJob is the mode of a result a job produces (ResultMeta.Mode).
const modeJob = "job"

// statusMeta is an answer without rows (a job's status, a download
// handed to the person) in a result's shape, so that it meets the query
// tools' output schema.
type statusMeta struct {
	Columns   []query.ResultColumn `json:"columns"`
	RowCount  int64                `json:"row_count"`
	Truncated bool                 `json:"truncated"`
	Mode      string               `json:"mode"`
	Job       *jobs.Status         `json:"job,omitempty"`
}

// withJob adds the job's status (without its result, which is the rest)
// to a done export's structured content.
func withJob(structured any, st jobs.Status) ([]byte, error) {
	raw, err := json.Marshal(structured)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	st.Result = nil
	m["job"] = st
	return json.Marshal(m)
}

type jobIn struct {
	JobID string  `json:"job_id"`
	WaitS float64 `json:"wait_s"`
}

// jobStatus answers job_status: the job's status once it has ended or
// wait_s (at most maxJobWait) has passed.
func jobStatus(ctx context.Context, ts *Set, c call, in jobIn) (output, error) {
	if ts.jobs == nil {
		return nil, wire.ErrNoJobs
	}
	wait := time.Duration(min(max(in.WaitS, 0), maxJobWait.Seconds()) * float64(time.Second))
	if ts.remoteJob != nil {
		if st, ok, err := ts.remoteJob(ctx, c.Caller, in.JobID, wait, false); ok {
			if err != nil {
				return nil, err
			}
			return jobOut{Status: st}, nil
		}
	}
	st, err := ts.jobs.Wait(ctx, c.Caller, in.JobID, wait)
	if err != nil {
		return nil, err
	}
	return jobOut{Status: st}, nil
}

// cancelJob answers cancel_job: the job stopped (its partial transfer
// deleted), or as it had ended.
func cancelJob(ctx context.Context, ts *Set, c call, in jobIn) (output, error) {
	if ts.jobs == nil {
		return nil, wire.ErrNoJobs
	}
	if ts.remoteJob != nil {
		if st, ok, err := ts.remoteJob(ctx, c.Caller, in.JobID, 0, true); ok {
			if err != nil {
				return nil, err
			}
			return jobOut{Status: st}, nil
		}
	}
	st, err := ts.jobs.Cancel(ctx, c.Caller, in.JobID)
	if err != nil {
		return nil, err
	}
	return jobOut{Status: st}, nil
}

func anySlice(v any) []any {
	s, _ := v.([]any)
	return s
}
