package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// balancer is haproxy, round-robin with no stickiness, in front of
// replicas, checking each one's /ready.
type balancer struct {
	url string
	cmd *exec.Cmd
}

// startBalancer runs haproxy in front of the replicas' base URLs. It skips
// the test when haproxy is not installed (.ci/run installs it).
func startBalancer(t *testing.T, backends ...string) *balancer {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		for _, p := range []string{"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
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
	out := &lockedBuffer{}
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
	deadline := time.Now().Add(20 * time.Second)
	for ok := 0; ok < 2*n; {
		resp, err := client.Get(b.url + "/ready")
		if err == nil {
			resp.Body.Close()
		}
		if err == nil && resp.StatusCode == http.StatusOK {
			ok++
			continue
		}
		ok = 0
		if time.Now().After(deadline) {
			t.Fatalf("the balancer does not pass requests: %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startReplicas runs n replicas of bin sharing the cluster database.
func startReplicas(t *testing.T, bin string, n int, extra ...string) []*proc {
	t.Helper()
	ps := make([]*proc, n)
	for i := range ps {
		ps[i] = startProc(t, bin, append([]string{"LAKEGATE_CLUSTER_DSN=" + dbURL}, extra...)...)
	}
	return ps
}

func TestBalancerSessionsAnyReplica(t *testing.T) {
	bin := buildBinary(t)
	ps := startReplicas(t, bin, 3)
	lb := startBalancer(t, ps[0].base, ps[1].base, ps[2].base)
	tok := token(t, "agent", "reader")

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
