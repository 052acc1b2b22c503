package integration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lakegate/lakegate/blocktransport"
)

// TestTasksTypeScript: the official TypeScript SDK's experimental tasks
// client (the MCP Tasks extension, 2025-11-25) over Streamable HTTP and
// legacy SSE. The server declares the capability and every tool's
// optional task support; a task-backed run_sql answers with a task at
// once (keeping the ttl asked for), reports its status, and gives the call's result through
// tasks/result; tasks/list shows it; a task cancelled while it runs ends
// cancelled and its stream says so.
func TestTasksTypeScript(t *testing.T) {
	env := nodeEnv(t)
	e := start(t, envOptions{blocks: &blocktransport.Options{}})
	tok := token("alice", "reader")
	for _, tc := range []struct{ kind, path string }{{"http", "/mcp"}, {"sse", "/mcp/sse"}} {
		t.Run(tc.kind, func(t *testing.T) {
			out, err := runNode(t, env, time.Minute, "node", "tasks.mjs", e.base+tc.path, tok, tc.kind)
			if err != nil {
				t.Fatalf("node tasks.mjs: %v\n%s", err, out)
			}
			var got struct {
				Capability struct {
					Requests struct {
						Tools struct {
							Call *struct{} `json:"call"`
						} `json:"tools"`
					} `json:"requests"`
					List   *struct{} `json:"list"`
					Cancel *struct{} `json:"cancel"`
				} `json:"capability"`
				RunSQLTaskSupport string   `json:"runSQLTaskSupport"`
				Messages          []string `json:"messages"`
				TaskID            string   `json:"taskId"`
				TTL               int64    `json:"ttl"`
				Text              string   `json:"text"`
				Error             string   `json:"error"`
				Listed            []string `json:"listed"`
				CancelledStatus   string   `json:"cancelledStatus"`
				CancelledError    string   `json:"cancelledError"`
				CancelledResult   bool     `json:"cancelledResult"`
			}
			line := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
			t.Logf("%s", line)
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("node tasks.mjs: %v\n%s", err, out)
			}
			if got.Capability.Requests.Tools.Call == nil || got.Capability.List == nil || got.Capability.Cancel == nil || got.RunSQLTaskSupport != "optional" {
				t.Errorf("declared: %s, want the tasks capability and run_sql's optional task support", line)
			}
			if len(got.Messages) < 3 || got.Messages[0] != "taskCreated" || got.Messages[len(got.Messages)-1] != "result" ||
				!slices.Contains(got.Messages, "taskStatus:completed") || got.Error != "" || !strings.Contains(got.Text, "5000") {
				t.Errorf("a task-backed call: %s, want taskCreated, its statuses, and the count of 5000 readings", line)
			}
			if got.TTL != 60000 {
				t.Errorf("the task's ttl: got %d ms, want the 60000 asked for (under the server's)", got.TTL)
			}
			if !slices.Contains(got.Listed, got.TaskID) {
				t.Errorf("tasks/list: %v, want the task %s", got.Listed, got.TaskID)
			}
			if got.CancelledStatus != "cancelled" || !strings.Contains(got.CancelledError, "cancelled") || got.CancelledResult {
				t.Errorf("a cancelled task: %s", line)
			}
		})
	}
}

// The Tasks extension of the 2026-07-28 revision (SEP-2663), driven by its
// official requester (@modelcontextprotocol/ext-tasks) over a modern-era
// client on the stateless /mcp: the server declares the extension; a
// quick call answers at once; an export answers with its task, which the
// requester follows to its result (the export's transfer); another
// subject does not find the task; a task cancelled while it runs ends
// cancelled.
func TestTasksExtension(t *testing.T) {
	env := nodeEnv(t)
	e := start(t, envOptions{blocks: &blocktransport.Options{}})
	out, err := runNode(t, env, time.Minute, "node", "tasksext.mjs", e.base+"/mcp", token("alice", "reader"), token("bob", "reader"))
	if err != nil {
		t.Fatalf("node tasksext.mjs: %v\n%s", err, out)
	}
	checkTasksExtension(t, out)
}

// checkTasksExtension checks what tasksext.mjs printed.
func checkTasksExtension(t *testing.T, out string) {
	t.Helper()
	var got struct {
		Era       string          `json:"era"`
		Extension json.RawMessage `json:"extension"`
		Quick     struct {
			Kind, Status, Text string
		} `json:"quick"`
		Export struct {
			Kind       string   `json:"kind"`
			TaskID     string   `json:"taskId"`
			Updates    []string `json:"updates"`
			Status     string   `json:"status"`
			Structured struct {
				Mode     string `json:"mode"`
				Transfer struct {
					Rows int64 `json:"rows"`
				} `json:"transfer"`
			} `json:"structured"`
		} `json:"export"`
		StrangerError string `json:"strangerError"`
		Endless       struct {
			Kind, Status string
		} `json:"endless"`
	}
	line := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	t.Logf("%s", line)
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("node tasksext.mjs: %v\n%s", err, out)
	}
	if got.Era != "modern" || string(got.Extension) != "{}" {
		t.Errorf("era %q, extension %s: want the modern era and the extension declared", got.Era, got.Extension)
	}
	if got.Quick.Kind == "task" || got.Quick.Status != "completed" || !strings.Contains(got.Quick.Text, "5000") {
		t.Errorf("a quick call: %+v, want its answer at once (5000 readings)", got.Quick)
	}
	if got.Export.Kind != "task" || got.Export.TaskID == "" || got.Export.Status != "completed" ||
		got.Export.Structured.Transfer.Rows != 5000 || len(got.Export.Updates) == 0 || got.Export.Updates[len(got.Export.Updates)-1] != "completed" {
		t.Errorf("an export: %+v, want a task followed to its transfer of 5000 rows", got.Export)
	}
	if !strings.Contains(got.StrangerError, "not found") && !strings.Contains(got.StrangerError, "no job") {
		t.Errorf("another subject's tasks/get: %q, want not found", got.StrangerError)
	}
	if got.Endless.Kind != "task" || got.Endless.Status != "cancelled" {
		t.Errorf("a cancelled task: %+v, want a task ending cancelled", got.Endless)
	}
}

// Subscriptions with the TypeScript SDK, on Streamable HTTP and SSE: the
// server declares them, a watch resource reads, and an ingest of a row
// the watch keeps is told to the subscriber (one of another device is
// not).
func TestSubscribeTypeScript(t *testing.T) {
	env := nodeEnv(t)
	e := start(t, envOptions{})
	forgetIngested(t)
	for _, tc := range []struct{ kind, path string }{{"http", "/mcp"}, {"sse", "/mcp/sse"}} {
		t.Run(tc.kind, func(t *testing.T) {
			out, err := runNode(t, env, time.Minute, "node", "subscribe.mjs", e.base+tc.path, token("alice", "reader"), tc.kind, e.base, token("ingest", "writer"))
			if err != nil {
				t.Fatalf("node subscribe.mjs: %v\n%s", err, out)
			}
			var got struct {
				Subscribe bool     `json:"subscribe"`
				URI       string   `json:"uri"`
				ReadRows  int      `json:"readRows"`
				Notified  []string `json:"notified"`
				AfterMs   *int64   `json:"afterMs"`
			}
			line := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
			t.Logf("%s", line)
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("node subscribe.mjs: %v\n%s", err, out)
			}
			if !got.Subscribe || got.ReadRows == 0 || len(got.Notified) != 1 || got.Notified[0] != got.URI || got.AfterMs == nil || *got.AfterMs > 10000 {
				t.Errorf("subscription: %s, want the capability, the newest rows, and one notice of the row the watch keeps, woken (not the tail's 25 s wait)", line)
			}
		})
	}
}

// forgetIngested deletes, when t ends, the readings a test ingested past
// the seed's (ids over 100000), which other tests count.
func forgetIngested(t *testing.T) {
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dbURL)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DELETE FROM readings WHERE id > 100000"); err != nil {
			t.Error(err)
		}
	})
}
