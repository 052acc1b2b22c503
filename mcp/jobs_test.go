package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/jobs"
)

// jobCall calls tool with args and returns its text and the job status
// in its structured content.
func jobCall(t *testing.T, cs *mcpsdk.ClientSession, tool string, args map[string]any) (string, jobs.Status, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var out struct{ Job jobs.Status }
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &out)
	return res.Content[0].(*mcpsdk.TextContent).Text, out.Job, res.IsError
}

// TestExportJob: an export answers at once with a running job, which goes
// on when the session that started it closes; its owner follows it from
// another session, another subject is told it does not exist, and
// cancel_job stops it and deletes its partial transfer.
func TestExportJob(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, blocktransport.Options{Dir: dir, BlockSize: 64 << 10})
	p, _ := newTestPlugin(t, Options{Blocks: store})
	srv := serveHTTP(t, p)
	first := connectStreamable(t, srv.URL, "alice", "2025-11-25", nil)
	endless := "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT x FROM c"
	start := time.Now()
	text, job, isErr := jobCall(t, first, "run_sql", map[string]any{"database": "iot", "sql": endless, "export": true})
	if isErr || job.State != jobs.Running || job.ID == "" || !strings.Contains(text, "job_status") {
		t.Fatalf("the export: got %q %+v, want a running job", text, job)
	}
	t.Logf("the export answered with its job in %v", time.Since(start).Round(time.Millisecond))
	first.Close()

	again := connectStreamable(t, srv.URL, "alice", "2025-11-25", nil)
	var running jobs.Status
	testutil.Eventually(t, 10*time.Second, "the job writes rows", func() bool {
		_, running, _ = jobCall(t, again, "job_status", map[string]any{"job_id": job.ID})
		return running.State == jobs.Running && running.Rows > 0 && running.Bytes > 0 && running.Transfer != ""
	})
	// Its sealed blocks are read while it runs.
	testutil.Eventually(t, 10*time.Second, "a window of the transfer being written", func() bool {
		res, err := again.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "get_result_block",
			Arguments: map[string]any{"transfer_id": running.Transfer, "offset": 0, "limit": 5}})
		if err != nil || res.IsError {
			return false
		}
		var w struct {
			Rows    int
			Writing bool
		}
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &w)
		text := res.Content[0].(*mcpsdk.TextContent).Text
		return w.Rows == 5 && w.Writing && strings.Contains(text, "still being written")
	})
	bob := connectStreamable(t, srv.URL, "bob", "2025-11-25", nil)
	if text, _, isErr := jobCall(t, bob, "job_status", map[string]any{"job_id": job.ID}); !isErr || !strings.Contains(text, "not_found") {
		t.Errorf("bob asks for alice's job: got %q", text)
	}
	if text, _, isErr := jobCall(t, bob, "cancel_job", map[string]any{"job_id": job.ID}); !isErr || !strings.Contains(text, "not_found") {
		t.Errorf("bob cancels alice's job: got %q", text)
	}

	text, st, isErr := jobCall(t, again, "cancel_job", map[string]any{"job_id": job.ID})
	if isErr || st.State != jobs.Cancelled || !strings.Contains(text, "cancelled") {
		t.Errorf("cancel: got %q %+v", text, st)
	}
	testutil.Eventually(t, 10*time.Second, "the partial transfer deleted", func() bool {
		entries, _ := os.ReadDir(dir)
		return len(entries) == 0 && len(store.List("")) == 0
	})

	// Over HTTP: the owner's list and the job, 404 to another subject.
	get := func(sub, path string) (int, []byte) {
		resp, err := clientFor(sub).Get(srv.URL + "/mcp" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	var list struct{ Jobs []jobs.Status }
	if code, body := get("alice", "/jobs"); code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Jobs) != 1 ||
		list.Jobs[0].State != jobs.Cancelled || list.Jobs[0].Result != nil {
		t.Errorf("GET /mcp/jobs: got %d %s", code, body)
	}
	if code, body := get("alice", "/jobs/"+job.ID+"?wait=2s"); code != http.StatusOK || !strings.Contains(string(body), `"state":"cancelled"`) {
		t.Errorf("GET /mcp/jobs/{id}: got %d %s", code, body)
	}
	if code, body := get("bob", "/jobs/"+job.ID); code != http.StatusNotFound {
		t.Errorf("GET /mcp/jobs/{id} as bob: got %d %s, want 404", code, body)
	}

	// A small export, followed to its end: the export's answer.
	res, err := again.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{
		"database": "iot", "sql": "SELECT id FROM devices", "export": true}})
	if err != nil || res.IsError {
		t.Fatal(res, err)
	}
	done := followJob(t, again, res)
	var meta ResultMeta
	raw, _ := json.Marshal(done.StructuredContent)
	_ = json.Unmarshal(raw, &meta)
	if meta.Mode != ModeBlocks || meta.Transfer == nil || meta.Transfer.Rows != int64(meta.RowCount) || meta.RowCount == 0 {
		t.Errorf("the done job: got %+v, want the export's answer", meta)
	}
	if len(done.Content) < 2 {
		t.Errorf("the done job: got %d contents, want the text and the block links", len(done.Content))
	}
	// The list leaves results out; the job's own route has its result.
	if code, body := get("alice", "/jobs"); code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Jobs) != 2 ||
		list.Jobs[0].State != jobs.Done || list.Jobs[0].Result != nil {
		t.Errorf("GET /mcp/jobs after the export: got %d %s", code, body)
	}
	if code, body := get("alice", "/jobs/"+list.Jobs[0].ID); code != http.StatusOK || !strings.Contains(string(body), `"transfer_id"`) {
		t.Errorf("GET /mcp/jobs/{id} of the done export: got %d %s, want its result", code, body)
	}
}

// TestSlowCallBecomesJob: a query call still running after mcp_job_after
// answers then with a job, which ends with the call's own answer; a quick
// call answers inline and leaves no job; a client gone within the wait
// stops its call.
func TestSlowCallBecomesJob(t *testing.T) {
	store := openStore(t, blocktransport.Options{Dir: t.TempDir()})
	const after = 300 * time.Millisecond
	p, _ := newTestPlugin(t, Options{Blocks: store, JobAfter: after})
	srv := serveHTTP(t, p)
	cs := connectStreamable(t, srv.URL, "alice", "2025-11-25", nil)

	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{
		"database": "iot", "sql": "SELECT count(*) AS n FROM devices"}})
	if err != nil || res.IsError {
		t.Fatal(res, err)
	}
	var meta ResultMeta
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &meta)
	alice := lakegate.Caller{Subject: "alice"}
	if meta.Mode != ModeInline || len(p.jobs.List(alice)) != 0 {
		t.Errorf("a quick call: mode %q, jobs %v; want inline, no job", meta.Mode, p.jobs.List(alice))
	}

	// A count that takes SQLite about a second; the race detector slows
	// it some sixty times, so that build counts fewer.
	n := 5_000_000
	if testutil.Race {
		n = 150_000
	}
	slow := fmt.Sprintf("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d) SELECT count(*) AS n FROM c", n)
	start := time.Now()
	text, job, isErr := jobCall(t, cs, "run_sql", map[string]any{"database": "iot", "sql": slow})
	took := time.Since(start)
	if isErr || job.State != jobs.Running || !strings.Contains(text, "ran past 300ms") || !strings.Contains(text, "job_status") {
		t.Fatalf("a slow call: got %q %+v, want a running job", text, job)
	}
	t.Logf("the slow call answered with its job after %v", took.Round(time.Millisecond))
	text, st, isErr := jobCall(t, cs, "job_status", map[string]any{"job_id": job.ID, "wait_s": 25})
	for !isErr && st.State == jobs.Running {
		text, st, isErr = jobCall(t, cs, "job_status", map[string]any{"job_id": job.ID, "wait_s": 25})
	}
	if isErr || st.State != jobs.Done || !strings.Contains(text, strconv.Itoa(n)) {
		t.Errorf("the job's end: got %q %+v, want the count", text, st)
	}
}

// A client of the 2026-07-28 Tasks extension that declares it with a call
// gets a call running past mcp_job_after answered with its task, and
// follows the task with tasks/get to the call's own answer; a call
// without the declaration answers as before. (mcp_job_after is a
// millisecond, so that a small count runs past it even at full speed.)
func TestSlowCallBecomesTask(t *testing.T) {
	store := openStore(t, blocktransport.Options{Dir: t.TempDir()})
	const after = time.Millisecond
	p, _ := newTestPlugin(t, Options{Blocks: store, JobAfter: after})
	srv := serveHTTP(t, p)
	post := func(method string, params map[string]any, declare bool) map[string]json.RawMessage {
		t.Helper()
		meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientInfo": map[string]string{"name": "test", "version": "1"}}
		caps := map[string]any{}
		if declare {
			caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
		}
		meta["io.modelcontextprotocol/clientCapabilities"] = caps
		params["_meta"] = meta
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		if name, ok := params["name"].(string); ok {
			req.Header.Set("Mcp-Name", name)
		}
		resp, err := clientFor("alice").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if i := bytes.LastIndex(data, []byte("data: ")); i >= 0 {
			data = data[i+len("data: "):] // the last event of a stream: the answer
		}
		var msg map[string]json.RawMessage
		if err := json.Unmarshal(bytes.TrimSpace(data), &msg); err != nil {
			t.Fatalf("%s: %v in %q", method, err, data)
		}
		return msg
	}
	var result struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
		Status     string `json:"status"`
		Result     struct {
			ResultType string `json:"resultType"`
			Content    []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	read := func(msg map[string]json.RawMessage) {
		t.Helper()
		result.Result.Content, result.Content = nil, nil
		if err := json.Unmarshal(msg["result"], &result); err != nil {
			t.Fatalf("%s: %v", msg["error"], err)
		}
	}

	// About 50 ms of SQLite, far past the 1 ms bound; the race detector
	// slows it some sixty times, so that build counts a tenth.
	n := 200_000
	if testutil.Race {
		n = 20_000
	}
	slow := fmt.Sprintf("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d) SELECT count(*) AS n FROM c", n)
	read(post("tools/call", map[string]any{"name": "run_sql", "arguments": map[string]any{"database": "iot", "sql": slow}}, false))
	if result.ResultType != "complete" || len(result.Content) == 0 || !strings.Contains(result.Content[0].Text, "job_status") {
		t.Errorf("a slow call without the extension: %+v, want the job's line", result)
	}
	read(post("tools/call", map[string]any{"name": "run_sql", "arguments": map[string]any{"database": "iot", "sql": slow}}, true))
	if result.ResultType != "task" || result.TaskID == "" || result.Status != "working" {
		t.Fatalf("a slow call with the extension: %+v, want its task", result)
	}
	id := result.TaskID
	// The count runs to its end.
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		read(post("tasks/get", map[string]any{"taskId": id}, true))
		if result.Status != "working" {
			break
		}
	}
	if result.Status != "completed" || result.Result.ResultType != "complete" || len(result.Result.Content) == 0 ||
		!strings.Contains(result.Result.Content[0].Text, strconv.Itoa(n)) {
		t.Errorf("the task's end: %+v, want the count as the call's result", result)
	}
	msg := post("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{}}, true)
	if !strings.Contains(string(msg["error"]), "asks for no input") {
		t.Errorf("tasks/update: %s, want an error: lakegate's tasks ask for no input", msg["error"])
	}
}
