package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/config"
)

// jsDir holds the Node clients (package.json pins their versions);
// `npm ci --prefix integration/js` (make test, .ci/run) installs them.
const jsDir = "js"

// nodeEnv returns PATH with integration/js/node_modules/.bin first (Node 22
// from the "node" package, the Inspector, the conformance suite), or skips
// the test when the packages are not installed.
func nodeEnv(t *testing.T) []string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(jsDir, "node_modules", ".bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "node")); err != nil {
		t.Skip("Node clients not installed: run `npm ci --prefix integration/js` (make test and .ci/run do)")
	}
	return []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "NO_COLOR=1"}
}

// runNode runs a command from node_modules/.bin (or node) in jsDir.
func runNode(t *testing.T, env []string, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	path := filepath.Join(jsDir, "node_modules", ".bin", name)
	abs, _ := filepath.Abs(path)
	cmd := exec.CommandContext(ctx, abs, args...)
	cmd.Dir = jsDir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// toolArgs are arguments that make each built-in tool succeed on the seed data.
var toolArgs = map[string]any{
	"list_tables":    map[string]any{"database": "iot"},
	"describe_table": map[string]any{"database": "iot", "table": "readings"},
	"query":          map[string]any{"database": "iot", "table": "devices", "max_rows": 3},
	"run_sql":        map[string]any{"database": "iot", "sql": "SELECT count(*) FROM readings"},
	"explain":        map[string]any{"database": "iot", "sql": "SELECT count(*) FROM readings"},
	"query_time_series": map[string]any{"database": "iot", "table": "readings", "time_column": "ts", "bucket": map[string]any{"unit": "hour", "count": 1},
		"start": "2025-01-01T00:00:00Z", "end": "2025-01-02T00:00:00Z"},
	"tail": map[string]any{"database": "iot", "table": "readings", "columns": []string{"id", "temperature"}, "max_rows": 3},
}

func TestTypeScriptSDKClient(t *testing.T) {
	env := nodeEnv(t)
	e := start(t, envOptions{blocks: &blocktransport.Options{}})
	for _, tc := range []struct{ name, path string }{{"sse", "/mcp/sse"}, {"http", "/mcp"}} {
		t.Run(tc.name, func(t *testing.T) {
			// A transfer of the same subject for get_result_block to read.
			tok := token("ts-"+tc.name, "reader")
			br, _ := export(t, e.connect(t, tok), "SELECT id FROM devices", map[string]any{"export": true})
			withBlock := maps.Clone(toolArgs)
			withBlock["get_result_block"] = map[string]any{"transfer_id": br.Transfer.ID, "block": 0}
			withBlock["job_status"] = map[string]any{"job_id": br.Job.ID}
			withBlock["cancel_job"] = map[string]any{"job_id": br.Job.ID}
			args, _ := json.Marshal(withBlock)
			out, err := runNode(t, env, 2*time.Minute, "node", "client.mjs", e.base+tc.path, tc.name, tok, string(args))
			if err != nil {
				t.Fatalf("node client.mjs: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			var sum struct {
				Server     string                            `json:"server"`
				Tools      map[string]struct{ IsError bool } `json:"tools"`
				Resources  []struct{ URI string }            `json:"resources"`
				Templates  []string                          `json:"templates"`
				Prompts    map[string]int                    `json:"prompts"`
				Completion []string                          `json:"completion"`
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
				t.Fatalf("summary: %v\n%s", err, out)
			}
			t.Logf("TypeScript SDK over %s: %s", tc.path, lines[len(lines)-1])
			if len(sum.Tools) != 11 {
				t.Errorf("tools called: got %d, want all 11", len(sum.Tools))
			}
			for name, r := range sum.Tools {
				if r.IsError {
					t.Errorf("tool %s: got an isError result, want success", name)
				}
			}
			if sum.Server != "lakegate" || len(sum.Resources) < 2 || len(sum.Templates) != 3 || len(sum.Prompts) != 3 {
				t.Errorf("got server %q, %d resources, templates %v, prompts %v; want lakegate, >=2, 3, 3",
					sum.Server, len(sum.Resources), sum.Templates, sum.Prompts)
			}
			if strings.Join(sum.Completion, ",") != "devices" {
				t.Errorf("completion: got %v, want [devices]", sum.Completion)
			}
		})
	}
}

// 200 connect–call–close cycles of the TypeScript SDK, then 200 health
// checks (connect, list tools, close), under one token: the SDK's close()
// sends no DELETE, so each leaves its session open, and past the cap of 64
// sessions per subject the idle ones must make room rather than lock the
// subject out.
func TestTypeScriptSDKSessionChurn(t *testing.T) {
	env := nodeEnv(t)
	e := start(t, envOptions{config: func(c *config.Config) { c.RateLimitRPS = 0 }})
	tok := token("churn", "reader")
	for _, mode := range []string{"call", "check"} {
		out, err := runNode(t, env, 3*time.Minute, "node", "cycles.mjs", e.base+"/mcp", tok, "200", mode)
		if err != nil {
			t.Fatalf("node cycles.mjs %s: %v\n%s", mode, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var sum struct {
			OK, Failed int
			FirstError string `json:"first_error"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
			t.Fatalf("summary: %v\n%s", err, out)
		}
		t.Logf("%s: %s", mode, lines[len(lines)-1])
		if sum.OK != 200 {
			t.Errorf("%s: %d of 200 cycles succeeded; first error: %s", mode, sum.OK, sum.FirstError)
		}
	}
	if st := e.plugin.Status(); st.Sessions["streamable"] > 64 {
		t.Errorf("open sessions: %d, want at most the cap of 64", st.Sessions["streamable"])
	}
}

func TestInspectorCLI(t *testing.T) {
	env := nodeEnv(t)
	e := start(t, envOptions{})
	header := "Authorization: Bearer " + token("inspector", "reader")
	for _, tc := range []struct{ transport, path string }{{"sse", "/mcp/sse"}, {"http", "/mcp"}} {
		t.Run(tc.transport, func(t *testing.T) {
			base := []string{"--cli", e.base + tc.path, "--transport", tc.transport, "--header", header}
			// --strict lints every tool's schemas and prints a finding per
			// problem (a schema that constrains nothing, a type array).
			out, err := runNode(t, env, 2*time.Minute, "mcp-inspector", append(base, "--method", "tools/list", "--strict")...)
			if err != nil || !strings.Contains(out, `"run_sql"`) {
				t.Fatalf("inspector tools/list: %v\n%s", err, out)
			}
			if strings.Contains(out, "Warning: ") || strings.Contains(out, "Error: ") {
				t.Errorf("inspector --strict found problems in the tool schemas:\n%s", out)
			}
			out, err = runNode(t, env, 2*time.Minute, "mcp-inspector", append(base, "--method", "tools/call",
				"--tool-name", "list_tables", "--tool-arg", "database=iot")...)
			if err != nil || !strings.Contains(out, "readings") || strings.Contains(out, `"isError": true`) {
				t.Fatalf("inspector tools/call list_tables: %v\n%s", err, out)
			}
		})
	}
}

// TestConformanceSuite runs @modelcontextprotocol/conformance against
// `lakegate serve --conformance` on /mcp, from a binary built with the
// conformance tag (the production build has no fixtures). The suite sends
// no credentials, so a loopback proxy in this test adds the bearer token; the Host header
// passes through unchanged for the DNS-rebinding scenario.
func TestConformanceSuite(t *testing.T) {
	env := nodeEnv(t)
	bin := buildBinary(t, "conformance")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--conformance")
	cmd.Env = binaryEnv("LAKEGATE_LISTEN=127.0.0.1:0", "LAKEGATE_JWT_SECRET="+testSecret, "LAKEGATE_MCP_ENABLED=true")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`url=(http://\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
	}()
	var base string
	select {
	case base = <-urls:
	case <-time.After(30 * time.Second):
		t.Fatal("lakegate serve --conformance did not report its URL")
	}
	target, _ := url.Parse(base)
	tok := token("conformance", "reader")
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+tok)
		},
		FlushInterval: -1,
	}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Full duplex, or the proxy cuts streams: lakegate answers a POST
		// with its first SSE event as soon as it has read the body, and
		// when the proxy writes those headers on, net/http's HTTP/1 server
		// drains and closes the proxy's inbound body. The transport's last
		// read of it (past Content-Length, to check there is no more) can
		// come after that, under load, and fails ("invalid Read on closed
		// Body"): the transport then drops the upstream connection with the
		// stream half sent (golang/go#40747). A call whose answer follows
		// later events (sampling, elicitation, progress, logging) then never
		// got its answer and the suite waited out its 60 s timeout.
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Errorf("proxy: full duplex: %v", err)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)

	expected, _ := filepath.Abs("conformance-expected-failures.yml")
	out, err := runNode(t, env, 10*time.Minute, "conformance", "server", "--url", proxy.URL+"/mcp", "--expected-failures", expected)
	var summary []string
	for _, line := range strings.Split(out, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "Total:") || strings.HasPrefix(l, "✗") {
			summary = append(summary, l)
		}
	}
	t.Logf("conformance suite: %s", strings.Join(summary, "; "))
	if err != nil {
		t.Fatalf("conformance suite: %v\n%s", err, out)
	}
}
