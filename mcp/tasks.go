package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/jobs"
	"github.com/lakegate/lakegate/mcp/internal/tools"
)

// The MCP Tasks extension (revision 2025-11-25) on the jobs: a tools/call
// with params.task starts the call as a job and answers at once with the
// task, which is the job; tasks/get, tasks/result, tasks/list and
// tasks/cancel read and stop jobs. Every job a subject has is one of its
// tasks, whatever started it (a task, an export, a call that ran long).
// The transports answer these requests, which the SDK does not know
// (transport.Tasks).

// taskPollInterval is the poll interval a task suggests to its client (a
// program, not a model: tasks/get answers at once, and tasks/result
// waits for the end).
const taskPollInterval = time.Second

// taskResultWait bounds one wait of tasks/result for its job's end; it
// waits again until the job ends or the request does.
const taskResultWait = 25 * time.Second

// relatedTaskKey names, in a task result's _meta, the task it belongs to.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// taskAnswers answers the Tasks extension's requests from the jobs.
type taskAnswers struct {
	registry *jobs.Registry
	servers  *servers
	tools    *tools.Set
}

// task is a job as the extension shows it.
type task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	TTL           int64  `json:"ttl"` // milliseconds a result is kept after the end
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	PollInterval  int64  `json:"pollInterval"`
	StatusMessage string `json:"statusMessage,omitempty"`
}

// Answer is transport.Tasks.
func (t *taskAnswers) Answer(ctx context.Context, caller lakegate.Caller, server *mcpsdk.Server, req *jsonrpc.Request) (any, error) {
	if t.registry == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "this server runs no tasks (it has no block store)"}
	}
	if req.Method == "tools/call" {
		return t.call(ctx, caller, server, req.Params)
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	if len(req.Params) > 0 {
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
	}
	switch req.Method {
	case "tasks/list":
		list := t.registry.List(caller)
		out := make([]task, len(list))
		for i, st := range list {
			out[i] = t.task(st)
		}
		return map[string]any{"tasks": out}, nil
	case "tasks/get":
		st, err := t.registry.Get(caller, p.TaskID)
		if err != nil {
			return nil, taskErr(err)
		}
		return t.task(st), nil
	case "tasks/cancel":
		st, err := t.registry.Cancel(ctx, caller, p.TaskID)
		if err != nil {
			return nil, taskErr(err)
		}
		return t.task(st), nil
	case "tasks/result":
		return t.result(ctx, caller, p.TaskID)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "unknown task method " + req.Method}
}

// call starts a tools/call as a task: the tool, as this server offers it
// to this caller, runs as a job of the caller's.
func (t *taskAnswers) call(ctx context.Context, caller lakegate.Caller, server *mcpsdk.Server, raw json.RawMessage) (any, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Task      struct {
			TTL float64 `json:"ttl"` // milliseconds
		} `json:"task"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	ps, ok := t.servers.of(server)
	var handler mcpsdk.ToolHandler
	if ok {
		handler, ok = ps.tool(p.Name)
	}
	if !ok || !tools.MayUse(caller, t.tools.RolesOf(p.Name)) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", p.Name)}
	}
	args := p.Arguments
	// The POST that carried the call paid its rate-limit token.
	// A ttl shorter than the server's is honoured; a longer one is not.
	keep := time.Duration(max(p.Task.TTL, 0) * float64(time.Millisecond))
	st, err := t.registry.StartKeep(host.WithPaid(ctx), caller.Subject, p.Name, keep, func(ctx context.Context, watch func(jobs.Meter)) (any, error) {
		res, err := handler(tools.InJob(ctx, watch), &mcpsdk.CallToolRequest{Params: &mcpsdk.CallToolParamsRaw{Name: p.Name, Arguments: args}})
		if err != nil {
			return nil, err
		}
		return taskResult{res}, nil
	})
	if err != nil {
		return nil, taskErr(err)
	}
	return map[string]any{"task": t.task(st)}, nil
}

// result waits for a task's end and answers its result: the tool result
// of a done job, with the task named in its _meta; an error for a job
// that failed, was cancelled or expired.
func (t *taskAnswers) result(ctx context.Context, caller lakegate.Caller, id string) (any, error) {
	st, err := t.registry.Get(caller, id)
	for err == nil && st.State == jobs.Running && ctx.Err() == nil {
		st, err = t.registry.Wait(ctx, caller, id, taskResultWait)
	}
	switch {
	case err != nil:
		return nil, taskErr(err)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case st.State != jobs.Done:
		msg := fmt.Sprintf("task %s %s", id, st.State)
		if st.Error != nil {
			msg += ": " + st.Error.Message
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
	}
	r, ok := st.Result.(interface{ ToolResult() *mcpsdk.CallToolResult })
	if !ok || r.ToolResult() == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("task %s has no tool result", id)}
	}
	res := *r.ToolResult()
	res.Meta = mcpsdk.Meta{relatedTaskKey: map[string]string{"taskId": id}}
	return &res, nil
}

// task shows job st as a task. A done job whose tool result is an error
// is a failed task; an expired one, failed with that said.
func (t *taskAnswers) task(st jobs.Status) task {
	out := task{TaskID: st.ID, CreatedAt: st.Created.Format(time.RFC3339Nano), LastUpdatedAt: st.Created.Format(time.RFC3339Nano),
		TTL: st.Keep.Milliseconds(), PollInterval: taskPollInterval.Milliseconds()}
	if st.Ended != nil {
		out.LastUpdatedAt = st.Ended.Format(time.RFC3339Nano)
	}
	switch st.State {
	case jobs.Running:
		out.Status = "working"
		out.StatusMessage = fmt.Sprintf("%d rows, %d bytes so far", st.Rows, st.Bytes)
	case jobs.Done:
		out.Status = "completed"
		if r, ok := st.Result.(interface{ ToolResult() *mcpsdk.CallToolResult }); ok && r.ToolResult() != nil && r.ToolResult().IsError {
			out.Status, out.StatusMessage = "failed", "the tool answered an error: see tasks/result"
		}
	case jobs.Cancelled:
		out.Status = "cancelled"
	case jobs.Expired:
		out.Status, out.StatusMessage = "failed", "its result has expired"
	default:
		out.Status = "failed"
		if st.Error != nil {
			out.StatusMessage = st.Error.Message
		}
	}
	return out
}

// taskResult is a task's tool result, kept with its job.
type taskResult struct{ res *mcpsdk.CallToolResult }

// ToolResult is the tool result (tasks/result).
func (r taskResult) ToolResult() *mcpsdk.CallToolResult { return r.res }

// MarshalJSON is its structured content, as a job's result shows (GET
// /mcp/jobs/{id}).
func (r taskResult) MarshalJSON() ([]byte, error) {
	if r.res == nil || r.res.StructuredContent == nil {
		return []byte("null"), nil
	}
	return json.Marshal(r.res.StructuredContent)
}

// taskErr is a jobs error as a JSON-RPC error: a task not found is
// invalid params (the spec's answer), a refusal keeps its message.
func taskErr(err error) error {
	var le *lakegate.Error
	if errors.As(err, &le) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: le.Message + hintOf(le)}
	}
	return err
}

func hintOf(le *lakegate.Error) string {
	if le.Hint == "" {
		return ""
	}
	return " (" + le.Hint + ")"
}
