package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/route"
)

// The MCP Tasks extension (protocol revision 2025-11-25): a tools/call
// with params.task answers at once with a task, which the client follows
// with tasks/get, tasks/result, tasks/list and tasks/cancel. go-sdk knows
// none of it (it refuses the methods before any middleware, and has no
// field for the capability or a tool's execution), so the transports
// answer those requests themselves, through a Tasks the plugin gives
// them, and add the capability and each tool's task support to the
// replies of initialize and tools/list. Tasks are the plugin's jobs.

// Tasks answers the task requests of a caller on a protocol server.
type Tasks interface {
	// Answer answers req (a task method, or a tools/call with a task) for
	// caller on server: its result or its error.
	Answer(ctx context.Context, caller lakegate.Caller, server *mcpsdk.Server, req *jsonrpc.Request) (any, error)
	// AnswerModern answers req, a tasks/get, tasks/update or tasks/cancel
	// of the 2026-07-28 extension (tasksmodern.go), for caller.
	AnswerModern(ctx context.Context, caller lakegate.Caller, req *jsonrpc.Request) (any, error)
	// Created is the answer, under the 2026-07-28 extension, of a call of
	// caller's that became task id.
	Created(caller lakegate.Caller, id string) (any, error)
}

// tasksCapability is the server capability the transports declare when
// they answer tasks.
const tasksCapability = `"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`

// taskMethod reports whether msg is a request the transports answer
// through Tasks rather than the protocol server.
func taskMethod(msg jsonrpc.Message) (*jsonrpc.Request, bool) {
	r, ok := msg.(*jsonrpc.Request)
	if !ok || !r.ID.IsValid() {
		return nil, false
	}
	switch r.Method {
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
		return r, true
	case "tools/call":
		var p struct {
			Task json.RawMessage `json:"task"`
		}
		return r, json.Unmarshal(r.Params, &p) == nil && len(p.Task) > 0 && string(p.Task) != "null"
	}
	return nil, false
}

// answerTask answers a task request as a JSON-RPC response.
func answerTask(ctx context.Context, t Tasks, caller lakegate.Caller, server *mcpsdk.Server, req *jsonrpc.Request) *jsonrpc.Response {
	res, err := t.Answer(ctx, caller, server, req)
	return taskResponse(req, res, err)
}

// taskResponse is the response to req answered res or err.
func taskResponse(req *jsonrpc.Request, res any, err error) *jsonrpc.Response {
	if err != nil {
		var je *jsonrpc.Error
		if !asJSONRPCError(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
			if lakegate.KindOf(err) == lakegate.KindInternal {
				je.Code = jsonrpc.CodeInternalError
			}
		}
		return &jsonrpc.Response{ID: req.ID, Error: je}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}}
	}
	return &jsonrpc.Response{ID: req.ID, Result: raw}
}

func asJSONRPCError(err error, je **jsonrpc.Error) bool {
	e, ok := err.(*jsonrpc.Error)
	if ok {
		*je = e
	}
	return ok
}

// withTasks adds the Tasks extension to result, the result of a reply to
// method: the capability to initialize's, each tool's task support
// ("optional": any call may run as a task) to tools/list's. Other
// results, and results it cannot read, are returned as they are.
func withTasks(method string, result []byte) []byte {
	switch method {
	case "initialize":
		i := bytes.Index(result, []byte(`"capabilities":{`))
		if i < 0 {
			return result
		}
		at := i + len(`"capabilities":{`)
		sep := ","
		if at < len(result) && result[at] == '}' {
			sep = ""
		}
		out := make([]byte, 0, len(result)+len(tasksCapability)+1)
		out = append(append(append(append(out, result[:at]...), tasksCapability...), sep...), result[at:]...)
		return out
	case "tools/list":
		var m map[string]json.RawMessage
		if json.Unmarshal(result, &m) != nil {
			return result
		}
		var tools []map[string]json.RawMessage
		if json.Unmarshal(m["tools"], &tools) != nil {
			return result
		}
		for _, t := range tools {
			if _, ok := t["execution"]; !ok {
				t["execution"] = json.RawMessage(`{"taskSupport":"optional"}`)
			}
		}
		raw, err := json.Marshal(tools)
		if err != nil {
			return result
		}
		m["tools"] = raw
		if out, err := json.Marshal(m); err == nil {
			return out
		}
	}
	return result
}

// taskReplies rewrites, for a Streamable HTTP POST carrying method, the
// reply the SDK writes (a JSON body or an event stream of one message):
// it holds the reply, small for these methods, and writes it rewritten by
// withTasks when the handler returns (flush).
type taskReplies struct {
	http.ResponseWriter
	method string
	buf    bytes.Buffer
	code   int
}

func (w *taskReplies) WriteHeader(code int) { w.code = code }

func (w *taskReplies) Write(p []byte) (int, error) { return w.buf.Write(p) }

// Flush is held until the reply is whole.
func (w *taskReplies) Flush() {}

// flush writes the held reply, rewritten.
func (w *taskReplies) flush() {
	body := w.buf.Bytes()
	if i := bytes.Index(body, []byte(`"result":`)); i >= 0 {
		// One message: its result runs to the envelope's closing brace.
		start := i + len(`"result":`)
		end := bytes.LastIndexByte(body, '}')
		if end > start {
			if result := body[start:end]; json.Valid(result) {
				var out []byte
				out = append(out, body[:start]...)
				out = append(out, withTasks(w.method, result)...)
				body = append(out, body[end:]...)
			}
		}
	}
	w.Header().Del("Content-Length")
	if w.code != 0 {
		w.ResponseWriter.WriteHeader(w.code)
	}
	_, _ = w.ResponseWriter.Write(body)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *taskReplies) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// maxTaskAnswers bounds the task requests an SSE session has waiting for
// their answers at once (tasks/result waits for its task's end): each
// holds a goroutine until then, and the POST that carried it is answered
// at once.
const maxTaskAnswers = 16

// sseTasks is what a legacy SSE session keeps for the Tasks extension:
// the methods of the requests whose replies it rewrites (initialize,
// tools/list), by id, and the slots of its task answers.
type sseTasks struct {
	methods sync.Map // id text → method
	slots   chan struct{}
}

func newSSETasks() *sseTasks { return &sseTasks{slots: make(chan struct{}, maxTaskAnswers)} }

// watch notes msg's id when its reply is to be rewritten.
func (t *sseTasks) watch(msg jsonrpc.Message) {
	if r, ok := msg.(*jsonrpc.Request); ok && r.ID.IsValid() && (r.Method == "initialize" || r.Method == "tools/list") {
		t.methods.Store(idLogText(r.ID), r.Method)
	}
}

// rewrite adds the Tasks extension to msg when it replies to a watched
// request.
func (t *sseTasks) rewrite(msg jsonrpc.Message) jsonrpc.Message {
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		return msg
	}
	method, ok := t.methods.LoadAndDelete(idLogText(r.ID)) // an error reply ends the watch too
	if !ok || r.Error != nil {
		return msg
	}
	out := *r
	out.Result = withTasks(method.(string), r.Result)
	return &out
}

// answerTask answers a task request on the session's event stream, apart
// from the POST that carried it (tasks/result waits for the task's end),
// until the session closes. Past maxTaskAnswers waiting, it is refused
// at once.
func (c *conn) answerTask(t Tasks, req *jsonrpc.Request) {
	c.unanswered.Add(1) // as a delivered call: its answer is counted out
	select {
	case c.tasks.slots <- struct{}{}:
	default:
		resp := &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("this session has %d task requests waiting for their answers, the most at once: wait for them, or ask on another session", maxTaskAnswers)}}
		if err := c.Write(context.Background(), resp); err != nil {
			c.unanswered.Add(-1)
		}
		return
	}
	go func() {
		defer func() { <-c.tasks.slots }()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-c.closed:
				cancel()
			case <-ctx.Done():
			}
		}()
		resp := answerTask(ctx, t, c.caller, c.server, req)
		if err := c.Write(ctx, resp); err != nil {
			c.unanswered.Add(-1)
		}
	}()
}

// peekRequest reads the one JSON-RPC request a POST carries, if it is one
// (nil for a batch, a notification or a response), and leaves the body
// to be read again. Only a body that holds one of needles (one that may
// hold a task request or a request whose reply is rewritten) is decoded.
func peekRequest(r *http.Request, needles ...string) (*jsonrpc.Request, error) {
	if r.Body == nil {
		return nil, nil
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, peekLimit+1))
	if err != nil {
		return nil, err
	}
	r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if len(head) > peekLimit || !slices.ContainsFunc(needles, func(n string) bool { return bytes.Contains(head, []byte(n)) }) {
		return nil, nil
	}
	trimmed := bytes.TrimSpace(head)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, nil
	}
	msg, err := decodeMessage(trimmed)
	if err != nil {
		return nil, nil // the SDK answers it
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		return req, nil
	}
	return nil, nil
}

// answerTask answers a task request of a stateful session: the session
// must be this caller's.
func (s *Streamable) answerTask(c *gin.Context, req *jsonrpc.Request) {
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	id := c.GetHeader("Mcp-Session-Id")
	if owner, ok := s.sessions.streamOwner(id); !ok || owner != caller.Subject {
		route.Fail(c, &lakegate.Error{Kind: lakegate.KindNotFound, Message: "unknown or closed MCP session",
			Hint: "initialize a new session"})
		return
	}
	defer s.sessions.useStream(id)()
	resp := answerTask(c.Request.Context(), s.tasks, caller, s.getServer(c.Request), req)
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		route.Fail(c, err)
		return
	}
	c.Data(http.StatusOK, "application/json", data)
}

// streamOwner is the subject of the open Streamable HTTP session id.
func (r *Sessions) streamOwner(id string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.streams[id]
	if s == nil {
		return "", false
	}
	return s.subject, true
}
