package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// withTasks adds the capability to initialize's result (empty or not) and
// each tool's optional task support to tools/list's, keeping a support a
// tool declares; other results are left as they are.
func TestWithTasks(t *testing.T) {
	for _, tc := range []struct{ method, in, want string }{
		{"initialize", `{"capabilities":{},"protocolVersion":"2025-11-25"}`,
			`{"capabilities":{` + tasksCapability + `},"protocolVersion":"2025-11-25"}`},
		{"initialize", `{"capabilities":{"tools":{}}}`, `{"capabilities":{` + tasksCapability + `,"tools":{}}}`},
		{"tools/list", `{"tools":[{"name":"a"},{"execution":{"taskSupport":"forbidden"},"name":"b"}]}`,
			`{"tools":[{"execution":{"taskSupport":"optional"},"name":"a"},{"execution":{"taskSupport":"forbidden"},"name":"b"}]}`},
		{"tools/call", `{"content":[]}`, `{"content":[]}`},
	} {
		got := string(withTasks(tc.method, []byte(tc.in)))
		if got != tc.want || !json.Valid([]byte(got)) {
			t.Errorf("%s %s: got %s, want %s", tc.method, tc.in, got, tc.want)
		}
	}
}

// taskMethod picks the task methods and a tools/call with a task, and
// leaves the rest (a plain call, a notification) to the protocol server.
func TestTaskMethod(t *testing.T) {
	id, _ := jsonrpc.MakeID(float64(1))
	for _, tc := range []struct {
		msg  jsonrpc.Message
		want bool
	}{
		{&jsonrpc.Request{ID: id, Method: "tasks/get", Params: json.RawMessage(`{"taskId":"x"}`)}, true},
		{&jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"run_sql","task":{"ttl":1000}}`)}, true},
		{&jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"run_sql","task":null}`)}, false},
		{&jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"run_sql"}`)}, false},
		{&jsonrpc.Request{Method: "tasks/get"}, false}, // a notification
	} {
		if _, got := taskMethod(tc.msg); got != tc.want {
			t.Errorf("%+v: got %v, want %v", tc.msg, got, tc.want)
		}
	}
}

// blockingTasks answers every task request once release is closed.
type blockingTasks struct {
	Tasks   // the methods the test does not call
	release chan struct{}
}

func (b blockingTasks) Answer(ctx context.Context, _ lakegate.Caller, _ *mcpsdk.Server, _ *jsonrpc.Request) (any, error) {
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return map[string]any{}, nil
}

// An SSE session holds at most maxTaskAnswers task requests waiting: the
// next is refused at once on its stream; the waiting ones are answered
// once their answers come, and their slots are free again. An error reply
// to a watched request ends its watch.
func TestSSETaskAnswersBounded(t *testing.T) {
	c := newConn("s", lakegate.Caller{Subject: "alice"}, 64, 1<<20, time.Second)
	c.tasks = newSSETasks()
	defer c.Close()
	tasks := blockingTasks{release: make(chan struct{})}
	for i := range maxTaskAnswers + 1 {
		id, _ := jsonrpc.MakeID(float64(i))
		c.answerTask(tasks, &jsonrpc.Request{ID: id, Method: "tasks/result"})
	}
	data, ok := c.out.pop()
	if !ok || !strings.Contains(string(frameBytes(t, data)), "the most at once") {
		t.Fatalf("the request past the bound: got %v, want its refusal at once", ok)
	}
	close(tasks.release)
	testutil.Eventually(t, 5*time.Second, "the waiting requests answered and their slots freed", func() bool {
		return len(c.tasks.slots) == 0 && c.unanswered.Load() == 0
	})

	id, _ := jsonrpc.MakeID(float64(99))
	c.tasks.watch(&jsonrpc.Request{ID: id, Method: "tools/list"})
	c.tasks.rewrite(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: 1, Message: "no"}})
	if _, ok := c.tasks.methods.Load(idLogText(id)); ok {
		t.Error("an error reply left its request watched")
	}
}

// frameBytes is a frame's parts, joined.
func frameBytes(t *testing.T, f frame) []byte {
	t.Helper()
	return bytes.Join(f, nil)
}
