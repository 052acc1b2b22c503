package transport

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
