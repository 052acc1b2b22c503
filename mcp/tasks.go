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

// The Tasks extension of the 2026-07-28 revision (SEP-2663), on the
// stateless /mcp: the client declares the extension with each request,
// and the server decides which calls become tasks. Here that is the calls
// that become jobs (an export, a call still running after mcp_job_after):
// their answer is the task (Created), which the client follows with
// tasks/get (the task, with its result once done) and stops with
// tasks/cancel. lakegate's tasks never ask for input (a call asks its
// person before it runs), so tasks/update finds none to take.

// modernTask is a job as the 2026-07-28 extension shows it.
type modernTask struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          int64           `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *jsonrpc.Error  `json:"error,omitempty"`
}

// Created is transport.Tasks: the answer of a call that became job id.
func (t *taskAnswers) Created(caller lakegate.Caller, id string) (any, error) {
	if t.registry == nil {
		return nil, errNoTasks
	}
	st, err := t.registry.Get(caller, id)
	if err != nil {
		return nil, taskErr(err)
	}
	out := t.modern(st)
	out.ResultType, out.Result, out.Error = "task", nil, nil
	if out.Status != "working" {
		// Ended between the answer and now: the answer is still the
		// task, which tasks/get shows ended.
		out.Status, out.StatusMessage = "working", ""
	}
	return out, nil
}

// AnswerModern is transport.Tasks: tasks/get, tasks/update and
// tasks/cancel of the 2026-07-28 extension.
func (t *taskAnswers) AnswerModern(ctx context.Context, caller lakegate.Caller, req *jsonrpc.Request) (any, error) {
	if t.registry == nil {
		return nil, errNoTasks
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil || p.TaskID == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "taskId is required"}
	}
	switch req.Method {
	case "tasks/get":
		st, err := t.registry.Get(caller, p.TaskID)
		if err != nil {
			return nil, taskErr(err)
		}
		return t.modern(st), nil
	case "tasks/cancel":
		if _, err := t.registry.Cancel(ctx, caller, p.TaskID); err != nil {
			return nil, taskErr(err)
		}
		return map[string]string{"resultType": "complete"}, nil
	case "tasks/update":
		if _, err := t.registry.Get(caller, p.TaskID); err != nil {
			return nil, taskErr(err)
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %s asks for no input (lakegate asks before a call runs)", p.TaskID)}
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "unknown task method " + req.Method}
}

var errNoTasks = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "this server runs no tasks (it has no block store)"}

// modern shows job st as a 2026-07-28 task: done, with the call's result
// (a tool's error answer is a result too, as the call would have
// answered); failed, with what the call would have answered (a tool
// result with isError), since a failing query is the tool's answer, not
// a protocol error; expired, failed with a protocol error (its result is
// gone).
func (t *taskAnswers) modern(st jobs.Status) modernTask {
	old := t.task(st)
	out := modernTask{ResultType: "complete", TaskID: st.ID, Status: old.Status, StatusMessage: old.StatusMessage,
		CreatedAt: old.CreatedAt, LastUpdatedAt: old.LastUpdatedAt, TTLMs: old.TTL, PollIntervalMs: old.PollInterval}
	var res *mcpsdk.CallToolResult
	switch st.State {
	case jobs.Running, jobs.Cancelled:
		return out
	case jobs.Expired:
		out.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("task %s: its result has expired", st.ID)}
		return out
	case jobs.Done:
		if r, ok := st.Result.(interface{ ToolResult() *mcpsdk.CallToolResult }); ok {
			res = r.ToolResult()
		}
	default:
		msg := "the task failed"
		if st.Error != nil {
			msg = st.Error.Message
			if st.Error.Hint != "" {
				msg += " (" + st.Error.Hint + ")"
			}
		}
		res = &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: msg}}}
	}
	raw, err := completeResult(res)
	if err != nil {
		out.Status, out.StatusMessage = "failed", ""
		out.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		return out
	}
	out.Status, out.StatusMessage, out.Result = "completed", "", raw
	return out
}

// completeResult is res as a complete result of the 2026-07-28 revision.
func completeResult(res *mcpsdk.CallToolResult) (json.RawMessage, error) {
	if res == nil {
		return nil, errors.New("the task has no tool result")
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	return json.Marshal(m)
}
