package transport

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/route"
)

// The Tasks extension of the 2026-07-28 revision (SEP-2663) on the
// stateless handler: a client declares the extension in each request's
// _meta, and the server decides which calls answer with a task. A tool
// call that became a job answers with a result marked taskMetaKey (the
// tools know the client takes tasks); taskCreated puts the task in that
// result's place. tasks/get, tasks/update and tasks/cancel, which the
// SDK does not know, are answered here, by the replica that holds the
// task (a job id names its replica): behind a balancer the request may
// reach any.

// tasksExtension names the extension, in capabilities and in a request's
// declared client capabilities.
const tasksExtension = "io.modelcontextprotocol/tasks"

// taskMetaKey marks a tool result that is a task's (tools.TaskMetaKey).
const taskMetaKey = "lakegate/task"

// maxTaskCreated bounds the reply taskCreated holds to read: a task's
// answer is a few hundred bytes, and a larger reply is a call's own
// answer, passed on as it is.
const maxTaskCreated = 64 << 10

// modernTaskMethod reports whether method is one of the extension's that
// the transport answers.
func modernTaskMethod(method string) bool {
	return method == "tasks/get" || method == "tasks/update" || method == "tasks/cancel"
}

// answerModernTask answers a task request of the 2026-07-28 extension,
// or forwards it to the replica that holds its task.
func (s *Streamable) answerModernTask(c *gin.Context, req *jsonrpc.Request) {
	var p struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(req.Params, &p) == nil && p.TaskID != "" && route.Forward(s.peers, c, p.TaskID) {
		return
	}
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	res, err := s.tasks.AnswerModern(c.Request.Context(), caller, req)
	data, err := jsonrpc.EncodeMessage(taskResponse(req, res, err))
	if err != nil {
		route.Fail(c, err)
		return
	}
	c.Data(http.StatusOK, "application/json", data)
}

// taskCreated passes on the reply to a stateless tools/call, putting a
// task in the place of a result marked as one. A JSON reply is held whole
// (up to maxTaskCreated, past which it passes unread); an event stream is
// read event by event, each passed on when complete.
type taskCreated struct {
	http.ResponseWriter
	created func(id string) (any, error)
	buf     bytes.Buffer
	code    int
	stream  bool // an event stream
	passing bool // past reading: written through
}

func (w *taskCreated) WriteHeader(code int) {
	w.code = code
	ct, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type"))
	w.stream = ct == "text/event-stream"
	if w.stream {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *taskCreated) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.passing {
		return w.ResponseWriter.Write(p)
	}
	w.buf.Write(p)
	if w.stream {
		// Pass on each complete event.
		end := bytes.LastIndex(w.buf.Bytes(), []byte("\n\n"))
		if end >= 0 {
			events := w.buf.Next(end + 2)
			if _, err := w.ResponseWriter.Write(w.rewriteEvents(events)); err != nil {
				return 0, err
			}
		}
	}
	if w.buf.Len() > maxTaskCreated {
		w.pass()
	}
	return len(p), nil
}

// pass writes what is held as it is and passes the rest through.
func (w *taskCreated) pass() {
	w.passing = true
	if !w.stream {
		w.ResponseWriter.WriteHeader(w.code)
	}
	_, _ = w.ResponseWriter.Write(w.buf.Bytes())
	w.buf.Reset()
}

// Flush passes on a stream's events; a JSON reply is held until whole.
func (w *taskCreated) Flush() {
	if w.stream || w.passing {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// flush writes what is held, rewritten, when the handler returns.
func (w *taskCreated) flush() {
	if w.passing || w.code == 0 && w.buf.Len() == 0 {
		return
	}
	if w.stream {
		_, _ = w.ResponseWriter.Write(w.rewriteEvents(w.buf.Bytes()))
		return
	}
	body := w.rewrite(w.buf.Bytes())
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(w.code)
	_, _ = w.ResponseWriter.Write(body)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *taskCreated) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// rewriteEvents rewrites the data lines of events that hold a marked
// result.
func (w *taskCreated) rewriteEvents(events []byte) []byte {
	if !bytes.Contains(events, []byte(taskMetaKey)) {
		return events
	}
	lines := bytes.Split(events, []byte("\n"))
	for i, l := range lines {
		if data, ok := bytes.CutPrefix(l, []byte("data: ")); ok && bytes.Contains(data, []byte(taskMetaKey)) {
			lines[i] = append([]byte("data: "), w.rewrite(data)...)
		}
	}
	return bytes.Join(lines, []byte("\n"))
}

// rewrite is msg, one JSON-RPC response, with a marked result replaced by
// its task; any other message as it is. The id is kept as it was written.
func (w *taskCreated) rewrite(msg []byte) []byte {
	if !bytes.Contains(msg, []byte(taskMetaKey)) {
		return msg
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return msg
	}
	var result struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	var id string
	if json.Unmarshal(m["result"], &result) != nil || json.Unmarshal(result.Meta[taskMetaKey], &id) != nil || id == "" {
		return msg
	}
	task, err := w.created(id)
	var raw []byte
	if err == nil {
		raw, err = json.Marshal(task)
	}
	if err != nil {
		// The task was there a moment ago: say what happened to it
		// rather than answer a task the client cannot find.
		delete(m, "result")
		m["error"], _ = json.Marshal(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()})
	} else {
		m["result"] = raw
	}
	out, err := json.Marshal(m)
	if err != nil {
		return msg
	}
	return out
}
