package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Benchmarks of a cluster of replicas, run by make bench
// (LAKEGATE_BENCH_CLUSTER=1 LAKEGATE_BENCH_DATABASE_URL=...): what
// forwarding costs, calls/s and CPU per call through haproxy with one and
// with three replicas, and how long the MCP switch takes to reach every
// replica.

// TestForwardInstructions counts, with callgrind, the instructions of both
// replicas per run_sql point call over SSE when the calls' POSTs reach the
// replica holding the stream (local) and when they reach the other one,
// which forwards them.
func TestForwardInstructions(t *testing.T) {
	benchURL := benchDatabase(t, "LAKEGATE_BENCH_CLUSTER")
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("valgrind is not installed (apt-get install valgrind)")
	}
	bin := buildBinary(t)
	type replica struct {
		p   *proc
		out string
	}
	var rs [2]replica
	for i := range rs {
		dir := t.TempDir()
		rs[i].out = filepath.Join(dir, "callgrind.out")
		wrapper := filepath.Join(dir, "lakegate-under-callgrind")
		script := fmt.Sprintf("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s %s \"$@\"\n", rs[i].out, bin)
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		rs[i].p = startProcWithin(t, 5*time.Minute, wrapper, benchEnv(benchURL, "GOMAXPROCS=1", underCallgrind,
			"LAKEGATE_MCP_KEEPALIVE=1h", "LAKEGATE_CLUSTER_DSN="+benchURL, "LAKEGATE_CLUSTER_SECRET="+clusterSecret)...)
	}
	// The session's stream is on replica 0; its POSTs go to replica 1 while
	// forward is set.
	var forward atomic.Bool
	other, _ := url.Parse(rs[1].p.base)
	client := &http.Client{Transport: rewriteHost{next: httpClient(token("bench", "reader")).Transport, host: other.Host, on: &forward}}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(t.Context(),
		&mcpsdk.SSEClientTransport{Endpoint: rs[0].p.base + "/mcp/sse", HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	args := map[string]any{"database": "bench", "sql": "SELECT * FROM readings WHERE id = $1", "params": []any{4242}}
	const calls = 50
	measure := func(name string) float64 {
		for range 3 { // warm up: connections, catalog, the owner's address
			callTool(t, cs, args)
		}
		for _, r := range rs {
			if b, err := exec.Command("callgrind_control", "--zero", strconv.Itoa(r.p.cmd.Process.Pid)).CombinedOutput(); err != nil {
				t.Fatalf("callgrind_control: %v %s", err, b)
			}
		}
		for range calls {
			callTool(t, cs, args)
		}
		var ir float64
		for _, r := range rs {
			before := time.Now()
			if b, err := exec.Command("callgrind_control", "--dump="+name, strconv.Itoa(r.p.cmd.Process.Pid)).CombinedOutput(); err != nil {
				t.Fatalf("callgrind_control: %v %s", err, b)
			}
			ir += dumpedInstructions(t, r.out, before)
		}
		return ir / calls
	}
	local := measure("local")
	forward.Store(true)
	forwarded := measure("forwarded")
	t.Logf("cluster: instructions per run_sql point call over SSE, both replicas: local %.2f M, forwarded %.2f M: %.2f x",
		local/1e6, forwarded/1e6, forwarded/local)
}

// rewriteHost sends the POSTs of an SSE session (its messages) to host
// while on is set.
type rewriteHost struct {
	next http.RoundTripper
	host string
	on   *atomic.Bool
}

func (r rewriteHost) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && r.on.Load() {
		req = req.Clone(req.Context())
		req.URL.Host, req.Host = r.host, r.host
	}
	return r.next.RoundTrip(req)
}

// TestClusterThroughput: 8 clients make 2,000 REST point queries through
// haproxy in front of one replica, then three; calls/s and the replicas'
// CPU time per call. Then the time the MCP switch takes to reach all three.
// On two cores, three replicas cannot scale: the figures show the cost of
// the balancer and the replicas beside one.
func TestClusterThroughput(t *testing.T) {
	benchURL := benchDatabase(t, "LAKEGATE_BENCH_CLUSTER")
	if haproxyBin() == "" {
		t.Skip("haproxy is not installed")
	}
	bin := buildBinary(t)
	ps := make([]*proc, 3)
	for i := range ps {
		ps[i] = startProc(t, bin, benchEnv(benchURL, "LAKEGATE_CLUSTER_DSN="+benchURL, "LAKEGATE_CLUSTER_SECRET="+clusterSecret, "LAKEGATE_MAX_CONNECTIONS_PER_ADDRESS=0",
			"LAKEGATE_MAX_QUERIES_PER_SUBJECT=0")...)
	}
	tok := token("bench", "reader")
	body := `{"database":"bench","sql":"SELECT * FROM readings WHERE id = 4242"}`
	for _, n := range []int{1, 3} {
		lb := startBalancer(t, baseURLs(ps[:n])...)
		client := newClient(t)
		run := func(calls int) {
			var wg sync.WaitGroup
			var next atomic.Int64
			for range 8 {
				wg.Go(func() {
					for next.Add(1) <= int64(calls) {
						req, _ := http.NewRequestWithContext(t.Context(), "POST", lb.url+"/rest/sql", strings.NewReader(body))
						req.Header.Set("Authorization", "Bearer "+tok)
						resp, err := client.Do(req)
						if err != nil || resp.StatusCode != http.StatusOK {
							t.Errorf("call: %v %v", resp, err)
							return
						}
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
		}
		run(200) // warm up
		const calls = 2000
		cpu := cpuTicks(t, ps[:n])
		start := time.Now()
		run(calls)
		took := time.Since(start)
		cpu = cpuTicks(t, ps[:n]) - cpu
		t.Logf("cluster: %d replica(s) behind haproxy: %.0f calls/s, %.0f µs of replica CPU per call (REST point query, 8 clients, %d calls)",
			n, calls/took.Seconds(), float64(cpu)*1e4/calls, calls)
	}

	// The MCP switch, set on one replica, seen by all three.
	admin := token("ops", "admin")
	var times []time.Duration
	for i := range 20 {
		on := i%2 == 1
		path := map[bool]string{true: "/admin/mcp/enable", false: "/admin/mcp/disable"}[on]
		start := time.Now()
		code, _ := post(t, ps[0].base+path, admin, "")
		if code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
		for _, p := range ps {
			for {
				_, st := get(t, p.base+"/admin/mcp/status", admin)
				if strings.Contains(st, fmt.Sprintf(`"enabled":%v`, on)) {
					break
				}
			}
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	t.Logf("cluster: the MCP switch reaches all 3 replicas in %v (median of 20, from the request to the last replica seen), %v at most",
		times[len(times)/2].Round(10*time.Microsecond), times[len(times)-1].Round(10*time.Microsecond))
}

func baseURLs(ps []*proc) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.base
	}
	return out
}

// cpuTicks is the user and system CPU time of the processes, in clock
// ticks (1/100 s).
func cpuTicks(t *testing.T, ps []*proc) int64 {
	t.Helper()
	var sum int64
	for _, p := range ps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		// Fields after the command name (in parentheses): utime is the
		// 14th field of the line, stime the 15th.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		sum += u + s
	}
	return sum
}
