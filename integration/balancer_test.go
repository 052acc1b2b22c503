package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/internal/testutil"
)

// balancer is haproxy, round-robin with no stickiness, in front of
// replicas, checking each one's /ready.
type balancer struct {
	url string
	cmd *exec.Cmd
}

// haproxyBin is the haproxy command, or "" when it is not installed.
func haproxyBin() string {
	if bin, err := exec.LookPath("haproxy"); err == nil {
		return bin
	}
	for _, p := range []string{"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// startBalancer runs haproxy in front of the replicas' base URLs. It skips
// the test when haproxy is not installed (.ci/run installs it).
func startBalancer(t *testing.T, backends ...string) *balancer {
	t.Helper()
	bin := haproxyBin()
	if bin == "" {
		t.Skip("haproxy is not installed (apt-get install haproxy)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var servers strings.Builder
	for i, b := range backends {
		fmt.Fprintf(&servers, "  server r%d %s check inter 200ms fall 1 rise 1\n", i, strings.TrimPrefix(b, "http://"))
	}
	cfg := fmt.Sprintf(`defaults
  mode http
  timeout connect 2s
  timeout client 10m
  timeout server 10m
  timeout tunnel 10m
frontend lakegate
  bind %s
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /ready
  http-check expect status 200
%s`, addr, servers.String())
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &testutil.Buffer{}
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("haproxy:\n%s", out.String())
		}
	})
	b := &balancer{url: "http://" + addr, cmd: cmd}
	b.awaitUp(t, len(backends))
	return b
}

// awaitUp waits until n requests in a row through the balancer succeed,
// one on each replica in turn.
func (b *balancer) awaitUp(t *testing.T, n int) {
	t.Helper()
	client := newClient(t)
	up := func() bool {
		resp, err := client.Get(b.url + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	testutil.Eventually(t, 20*time.Second, "the balancer to pass requests", func() bool {
		for range 2 * n {
			if !up() {
				return false
			}
		}
		return true
	})
}

// startReplicas runs n replicas of bin sharing the cluster database.
func startReplicas(t *testing.T, bin string, n int, extra ...string) []*proc {
	t.Helper()
	ps := make([]*proc, n)
	for i := range ps {
		ps[i] = startProc(t, bin, append(clusterEnv(), extra...)...)
	}
	return ps
}

func TestBalancerSessionsAnyReplica(t *testing.T) {
	bin := buildBinary(t)
	ps := startReplicas(t, bin, 3)
	lb := startBalancer(t, ps[0].base, ps[1].base, ps[2].base)
	tok := token("agent", "reader")

	sse := connectSSE(t, lb.url, tok)
	stream := connectStreamableAt(t, lb.url, tok, "2025-11-25")
	stateless := connectStreamableAt(t, lb.url, tok, "2026-07-28")
	for i := range 6 {
		for name, cs := range map[string]*mcpsdk.ClientSession{"sse": sse, "streamable": stream, "stateless": stateless} {
			res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": "SELECT count(*) FROM devices"}})
			if err != nil || res.IsError {
				t.Fatalf("%s call %d through the balancer: %v %v", name, i, err, res)
			}
		}
	}
	// The POSTs of the SSE session reached more than its own replica.
	entries := 0
	for _, p := range ps {
		if strings.Contains(p.stderr.String(), `"route":"/mcp/messages/"`) {
			entries++
		}
	}
	if entries < 2 {
		t.Errorf("SSE messages entered through %d replica(s); round robin should spread them", entries)
	}
}

func connectSSE(t *testing.T, base, tok string) *mcpsdk.ClientSession {
	t.Helper()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "lakegate-it", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.SSEClientTransport{Endpoint: base + "/mcp/sse", HTTPClient: httpClient(tok)}, nil)
	if err != nil {
		t.Fatalf("connect %s/mcp/sse: %v", base, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func connectStreamableAt(t *testing.T, base, tok, version string) *mcpsdk.ClientSession {
	t.Helper()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "lakegate-it", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: httpClient(tok), MaxRetries: -1},
		&mcpsdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s/mcp (%s): %v", base, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Block transfers, the admin switch, the TypeScript SDK and lakegate fetch
// through the balancer: a transfer made in one session is read in a
// session of another replica, and through every replica.
func TestBalancerBlocksAndSwitch(t *testing.T) {
	bin := buildBinary(t)
	ps := startReplicas(t, bin, 3)
	lb := startBalancer(t, ps[0].base, ps[1].base, ps[2].base)
	tok := token("agent", "reader")
	admin := token("ops", "admin")

	br, _ := export(t, connectSSE(t, lb.url, tok), "SELECT id, name FROM devices ORDER BY id", map[string]any{"export": true})
	id := br.Transfer.ID
	// Every replica serves its manifest and blocks (round robin: three
	// reads, three replicas).
	for i := range 6 {
		code, body := get(t, lb.url+"/mcp/blocks/"+id+"/0", tok)
		if code != http.StatusOK || int64(len(body)) != br.Transfer.Blocks[0].Size {
			t.Fatalf("block read %d through the balancer: %d, %d bytes", i, code, len(body))
		}
	}
	// Sessions on any replica read it, by tool and by resource.
	for range 3 {
		cs := connectStreamableAt(t, lb.url, tok, "2025-11-25")
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "get_result_block", Arguments: map[string]any{"transfer_id": id, "block": 0}})
		if err != nil || res.IsError || res.StructuredContent.(map[string]any)["crc32c"] != br.Transfer.Blocks[0].CRC32C {
			t.Fatalf("get_result_block in another session: %v %v", err, res)
		}
		rr, err := cs.ReadResource(t.Context(), &mcpsdk.ReadResourceParams{URI: "lakegate://transfers/" + id + "/blocks/0"})
		if err != nil || len(rr.Contents) != 1 || int64(len(rr.Contents[0].Text)) != br.Transfer.Blocks[0].Size {
			t.Fatalf("resources/read in another session: %v", err)
		}
		// Another subject cannot, wherever it lands.
		other := connectStreamableAt(t, lb.url, token("mallory", "reader"), "2025-11-25")
		if res := callJSON(t, other, "get_result_block", map[string]any{"transfer_id": id, "block": 0}, nil); !res.IsError {
			t.Fatal("another subject read the transfer")
		}
	}

	// The TypeScript SDK calls every tool over both transports.
	if env := nodeEnvOrSkip(t); env != nil {
		withBlock := maps.Clone(toolArgs)
		withBlock["get_result_block"] = map[string]any{"transfer_id": id, "block": 0}
		// The export's job, which may run on another replica than the
		// client's session: job_status reads it there.
		withBlock["job_status"] = map[string]any{"job_id": br.Job.ID}
		withBlock["cancel_job"] = map[string]any{"job_id": br.Job.ID}
		args, _ := json.Marshal(withBlock)
		for _, tc := range []struct{ path, kind string }{{"/mcp/sse", "sse"}, {"/mcp", "http"}} {
			out, err := runNode(t, env, 2*time.Minute, "node", "client.mjs", lb.url+tc.path, tc.kind, tok, string(args))
			if err != nil {
				t.Fatalf("TypeScript SDK over %s through the balancer: %v\n%s", tc.path, err, out)
			}
			if strings.Contains(out, `"isError":true`) {
				t.Errorf("TypeScript SDK over %s: a tool failed: %s", tc.path, out)
			}
		}
		// The 2026-07-28 Tasks extension: each stateless request may reach
		// another replica than the one that holds its task.
		out, err := runNode(t, env, 2*time.Minute, "node", "tasksext.mjs", lb.url+"/mcp", tok, token("stranger", "reader"))
		if err != nil {
			t.Fatalf("node tasksext.mjs through the balancer: %v\n%s", err, out)
		}
		checkTasksExtension(t, out)
	}

	// lakegate fetch exports a million rows and fetches their blocks in
	// parallel through the balancer.
	stderr, took, err := runFetch(t, bin, lb.url, "--database", "iot", "--sql",
		"SELECT g AS id, md5(g::text) AS h FROM generate_series(1, 1000000) g", "-o", filepath.Join(t.TempDir(), "rows.ndjson"))
	m := fetchLine.FindStringSubmatch(stderr)
	if err != nil || m == nil || m[2] != "1000000" {
		t.Fatalf("fetch through the balancer: %v\n%s", err, stderr)
	}
	t.Logf("1M rows fetched through the balancer in %.2f s: %s blocks, %s bytes", took.Seconds(), m[3], m[4])

	// The admin switch through the balancer reaches every replica.
	for _, on := range []bool{false, true} {
		path := "/admin/mcp/disable"
		if on {
			path = "/admin/mcp/enable"
		}
		req, _ := http.NewRequestWithContext(t.Context(), "POST", lb.url+path, nil)
		resp, err := httpClient(admin).Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s through the balancer: %v %v", path, resp, err)
		}
		resp.Body.Close()
		start := time.Now()
		for _, p := range ps {
			testutil.Eventually(t, 10*time.Second-time.Since(start), p.base+" to follow "+path, func() bool {
				var st struct{ Enabled bool }
				code, body := get(t, p.base+"/admin/mcp/status", admin)
				return code == http.StatusOK && json.Unmarshal([]byte(body), &st) == nil && st.Enabled == on
			})
		}
		t.Logf("%s reached all three replicas in %v", path, time.Since(start))
	}
}

// A replica dies: its sessions fail with a clear error, new sessions and
// stateless calls carry on through the others once the balancer's check
// has marked it down.
func TestBalancerReplicaLost(t *testing.T) {
	bin := buildBinary(t)
	ps := startReplicas(t, bin, 3)
	lb := startBalancer(t, ps[0].base, ps[1].base, ps[2].base)
	tok := token("agent", "reader")
	doomed := connectStreamableAt(t, lb.url, tok, "2025-11-25")
	var owner *proc
	for _, p := range ps {
		if m := prefixLine.FindStringSubmatch(p.stderr.String()); m != nil && strings.HasPrefix(doomed.ID(), m[1]) {
			owner = p
		}
	}
	if owner == nil {
		t.Fatalf("no replica's prefix begins the session id %s", doomed.ID())
	}
	if err := owner.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-owner.done
	lb.awaitUp(t, 2)

	call := func(cs *mcpsdk.ClientSession) error {
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_databases"})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %v", res.Content)
		}
		return err
	}
	if err := call(doomed); err == nil {
		t.Fatal("a call on the dead replica's session succeeded")
	}
	// What the balancer's replicas answer for it: a clear 503.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", lb.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", doomed.ID())
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := httpClient(tok).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "does not answer") {
		t.Errorf("a request of the dead replica's session: %d %s, want 503 saying its replica does not answer", resp.StatusCode, body)
	}
	fresh := connectStreamableAt(t, lb.url, tok, "2025-11-25")
	sse := connectSSE(t, lb.url, tok)
	stateless := connectStreamableAt(t, lb.url, tok, "2026-07-28")
	for i := range 10 {
		for name, cs := range map[string]*mcpsdk.ClientSession{"new session": fresh, "new SSE session": sse, "stateless": stateless} {
			if err := call(cs); err != nil {
				t.Fatalf("%s, call %d after the replica died: %v", name, i, err)
			}
		}
	}
}

var prefixLine = regexp.MustCompile(`"msg":"cluster: replica registered","prefix":"([0-9a-f]+)"`)

// nodeEnvOrSkip is nodeEnv, or nil when the Node clients are not installed
// (the caller skips only its Node part).
func nodeEnvOrSkip(t *testing.T) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(jsDir, "node_modules", ".bin", "node")); err != nil {
		t.Log("the Node MCP clients are not installed (make js-deps): the TypeScript SDK part is left out")
		return nil
	}
	return nodeEnv(t)
}

// The console through the balancer: its lists cover every replica, and
// closing, deleting and downloading reach the replica that holds the
// session, transfer or ticket, whichever replica the request lands on.
func TestBalancerConsole(t *testing.T) {
	bin := buildBinary(t)
	ps := startReplicas(t, bin, 3)
	lb := startBalancer(t, ps[0].base, ps[1].base, ps[2].base)
	tok, admin := token("agent", "reader"), token("ops", "admin")
	connectSSE(t, lb.url, tok)
	connectStreamableAt(t, lb.url, tok, "2025-11-25")
	br, _ := export(t, connectSSE(t, lb.url, tok), "SELECT id, name FROM devices ORDER BY id", map[string]any{"export": true})
	call := func(method, path, who, body string, want int, out any) {
		t.Helper()
		consoleCall(t, lb.url, method, path, who, body, want, out)
	}
	var sessions struct{ Sessions []host.SessionInfo }
	for range 3 { // one request on each replica
		call("GET", "/console/api/sessions", admin, "", http.StatusOK, &sessions)
		if len(sessions.Sessions) != 3 {
			t.Fatalf("sessions through the balancer: %d, want all 3 of the cluster", len(sessions.Sessions))
		}
	}
	// The overview: the cluster's on every replica, and a replica's
	// (asked by prefix) whichever replica the request lands on.
	type overview struct {
		Replica  string
		Replicas []struct{ Replica string }
		Sessions struct{ SSE, Streamable, Active, Idle int }
	}
	var prefixes []string
	for range 3 {
		var ov overview
		call("GET", "/console/api/overview", admin, "", http.StatusOK, &ov)
		if s := ov.Sessions; ov.Replica != "" || len(ov.Replicas) != 3 || s.SSE != 2 || s.Streamable != 1 || s.Active != 3 || s.Idle != 0 {
			t.Fatalf("the cluster's overview through the balancer: %+v, want 3 replicas with 2 SSE and 1 Streamable HTTP session, all active", ov)
		}
		prefixes = prefixes[:0]
		for _, r := range ov.Replicas {
			prefixes = append(prefixes, r.Replica)
		}
	}
	for _, p := range prefixes {
		held := 0
		for _, si := range sessions.Sessions {
			if strings.HasPrefix(si.ID, p) {
				held++
			}
		}
		for range 3 {
			var ov overview
			call("GET", "/console/api/overview?replica="+p, admin, "", http.StatusOK, &ov)
			if ov.Replica != p || len(ov.Replicas) != 0 || ov.Sessions.SSE+ov.Sessions.Streamable != held {
				t.Fatalf("replica %s's overview through the balancer: %+v, want its own %d sessions", p, ov, held)
			}
		}
	}
	call("GET", "/console/api/overview?replica=00000000", admin, "", http.StatusNotFound, nil)

	for _, si := range sessions.Sessions[:2] {
		call("DELETE", "/console/api/sessions/"+si.ID, admin, "", http.StatusOK, nil)
	}
	call("GET", "/console/api/sessions", admin, "", http.StatusOK, &sessions)
	if len(sessions.Sessions) != 1 {
		t.Errorf("after closing two: %d sessions", len(sessions.Sessions))
	}
	var transfers struct{ Transfers []host.TransferInfo }
	for range 3 {
		call("GET", "/console/api/transfers", tok, "", http.StatusOK, &transfers)
		if len(transfers.Transfers) != 1 || transfers.Transfers[0].ID != br.Transfer.ID {
			t.Fatalf("transfers through the balancer: %+v", transfers.Transfers)
		}
		var ticket struct{ URL string }
		call("POST", "/console/api/downloads", tok, `{"transfer":"`+br.Transfer.ID+`"}`, http.StatusOK, &ticket)
		resp, err := http.Get(lb.url + ticket.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if sum := sha256.Sum256(body); resp.StatusCode != http.StatusOK || int64(len(body)) != br.Transfer.Bytes || hex.EncodeToString(sum[:]) != sentSum(resp) {
			t.Fatalf("download through the balancer: %d, %d bytes, sha256 %x; want %d bytes and the sum sent, %q", resp.StatusCode, len(body), sum, br.Transfer.Bytes, sentSum(resp))
		}
	}
	call("DELETE", "/console/api/transfers/"+br.Transfer.ID, tok, "", http.StatusOK, nil)
	call("GET", "/console/api/transfers", tok, "", http.StatusOK, &transfers)
	if len(transfers.Transfers) != 0 {
		t.Errorf("after delete: %+v", transfers.Transfers)
	}
}

// A tail waiting on one replica is woken by an ingest on another (NOTIFY
// in the ingest's transaction; the re-check is off), over MCP and REST,
// and answers only the rows its filter keeps.
func TestTailAcrossReplicas(t *testing.T) {
	bin := buildBinary(t)
	ps := startReplicas(t, bin, 2, "LAKEGATE_TAIL_RECHECK=0")
	forgetIngested(t)
	tok := token("agent", "reader")
	cs := connectStreamableAt(t, ps[1].base, tok, "2025-11-25")
	args := map[string]any{"database": "iot", "table": "readings", "columns": []string{"id", "device_id"},
		"filters": []any{map[string]any{"column": "device_id", "op": "=", "value": 7}}, "max_rows": 2}
	var first struct {
		result
		NextCursor string `json:"next_cursor"`
	}
	callJSON(t, cs, "tail", args, &first)
	if first.RowCount != 2 || first.NextCursor == "" {
		t.Fatalf("the newest rows: %+v, want device 7's last two and a cursor", first)
	}
	ingest := func(id int, device int) {
		body := fmt.Sprintf(`[{"id": %d, "device_id": %d, "ts": "2026-01-01T00:00:00Z", "temperature": 20, "humidity": 40, "status": "ok"}]`, id, device)
		if code, out := post(t, ps[0].base+"/data/iot/readings", token("ingest", "writer"), body); code != http.StatusOK {
			t.Errorf("ingest: %d %s", code, out)
		}
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		ingest(900001, 8) // another device: the tail looks and waits on
		time.Sleep(300 * time.Millisecond)
		ingest(900002, 7)
	}()
	args["cursor"], args["wait_s"] = first.NextCursor, 20
	start := time.Now()
	var next result
	callJSON(t, cs, "tail", args, &next)
	if fmt.Sprint(next.Rows) != "[[900002 7]]" || time.Since(start) > 10*time.Second {
		t.Fatalf("the waiting tail answered %v after %v, want device 7's new row, woken before its wait ran out", next.Rows, time.Since(start))
	}

	// REST, on the other replica, from where MCP began: the same row (a
	// cursor names a row, whatever asks).
	body, _ := json.Marshal(map[string]any{"database": "iot", "table": "readings", "columns": args["columns"],
		"filters": args["filters"], "cursor": first.NextCursor, "limit": 2})
	code, out := post(t, ps[0].base+"/rest/tail", tok, string(body))
	if code != http.StatusOK || !strings.Contains(out, `[900002,7]`) || !strings.Contains(out, `"next_cursor"`) {
		t.Errorf("REST tail: %d %s", code, out)
	}
}
