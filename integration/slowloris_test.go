package integration

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/testutil"
)

// buildChaos builds the chaos program (integration/chaos).
func buildChaos(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "chaos")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./chaos").CombinedOutput(); err != nil {
		t.Fatalf("go build chaos: %v\n%s", err, out)
	}
	return bin
}

// slowlorisReport is the chaos program's slowloris report.
type slowlorisReport struct {
	Opened     int     `json:"opened"`
	DialFailed int     `json:"dial_failed"`
	Closed     int     `json:"closed"`
	StillOpen  int     `json:"still_open"`
	CloseMaxMS float64 `json:"close_max_ms"`
}

// 20,000 half-open unauthenticated connections from loopback (half with
// headers that never end, half with a body that never comes), some
// addresses past their per-address cap and all of them past the overall
// cap: /health and an authenticated run_sql still answer at once, every
// half-open connection is closed within the header timeout, and the caps
// say so in the log.
func TestSlowlorisFlood(t *testing.T) {
	const (
		total         = 20000
		headerTimeout = 2 * time.Second
	)
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	// Each attacker process holds its connections within its own
	// descriptor limit.
	perProc := min(10000, int(rl.Cur)-256)
	if perProc < 500 {
		t.Skipf("descriptor limit %d is too low for the flood", rl.Cur)
	}
	bin, chaos := buildBinary(t), buildChaos(t)
	p := startProc(t, bin, "LAKEGATE_HEADER_TIMEOUT="+headerTimeout.String(),
		"LAKEGATE_MAX_CONNECTIONS=2000", "LAKEGATE_MAX_CONNECTIONS_PER_ADDRESS=256")
	target := strings.TrimPrefix(p.base, "http://")

	type attacker struct {
		cmd    *exec.Cmd
		out    *bufio.Scanner
		stderr *testutil.Buffer
	}
	var attackers []attacker
	for i, left := 0, total; left > 0; i++ {
		n := min(left, perProc)
		left -= n
		// Odd attackers crowd 2 addresses, past the per-address cap of
		// 256 (about half the 2,000 held are theirs); even ones spread
		// over 50.
		addrs := 50
		if i%2 == 1 {
			addrs = 2
		}
		cmd := exec.Command(chaos, "slowloris", "-target", target, "-conns", strconv.Itoa(n),
			"-from", "127.0."+strconv.Itoa(1+i)+".1", "-addrs", strconv.Itoa(addrs), "-hold", (headerTimeout + 4*time.Second).String())
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		a := attacker{cmd: cmd, out: bufio.NewScanner(out), stderr: &testutil.Buffer{}}
		cmd.Stderr = a.stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		attackers = append(attackers, a)
	}
	for _, a := range attackers { // every connection opened
		if !a.out.Scan() || !strings.Contains(a.out.Text(), `"opened"`) {
			t.Fatalf("attacker: %s", a.stderr.String())
		}
	}

	// While the half-open connections are held: health, and a whole MCP
	// session with a query, each on fresh connections.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	var slowest time.Duration
	for range 5 {
		start := time.Now()
		resp, err := fresh.Get(p.base + "/health")
		if err != nil {
			t.Fatalf("/health during the flood: %v", err)
		}
		resp.Body.Close()
		slowest = max(slowest, time.Since(start))
	}
	start := time.Now()
	tok := token("alice", "reader")
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "flood-it", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.StreamableClientTransport{
		Endpoint: p.base + "/mcp", HTTPClient: httpClient(tok), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect during the flood: %v", err)
	}
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql",
		Arguments: map[string]any{"database": "iot", "sql": "SELECT count(*) AS n FROM devices"}})
	if err != nil || res.IsError {
		t.Fatalf("run_sql during the flood: %v %s", err, textOf(res))
	}
	callTook := time.Since(start)
	cs.Close()
	t.Logf("during the flood: slowest /health %v, connect + run_sql %v", slowest, callTook)
	if slowest > 2*time.Second || callTook > 5*time.Second {
		// Generous bounds: the figure that matters is in `make chaos`;
		// this catches a server that stopped answering.
		t.Errorf("the flood held the server: /health %v, run_sql %v", slowest, callTook)
	}

	for _, a := range attackers {
		if !a.out.Scan() {
			t.Fatalf("attacker report: %s", a.stderr.String())
		}
		var rep slowlorisReport
		if err := json.Unmarshal(a.out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		t.Logf("attacker: %+v", rep)
		if rep.StillOpen != 0 || rep.Opened == 0 {
			t.Errorf("%d of %d half-open connections outlived the header timeout %v", rep.StillOpen, rep.Opened, headerTimeout)
		}
		// Counted from the attacker's side, where a connection waits
		// for its accept too: slack for a loaded machine, far below the
		// 30 s read timeout.
		if rep.CloseMaxMS > float64((2*headerTimeout + time.Second).Milliseconds()) {
			t.Errorf("a half-open connection was closed after %.0f ms, want about the header timeout %v", rep.CloseMaxMS, headerTimeout)
		}
		if err := a.cmd.Wait(); err != nil {
			t.Errorf("attacker: %v: %s", err, a.stderr.String())
		}
	}
	logs := p.stderr.String()
	for _, cap := range []string{`"cap":"overall"`, `"cap":"per_address"`} {
		if !strings.Contains(logs, `"msg":"connection cap reached`) || !strings.Contains(logs, cap) {
			t.Errorf("no log line for the %s cap", cap)
		}
	}
}

// tricklePost opens a connection from loopback that sends an authenticated
// POST /rest/sql declaring a 100,000-byte body and returns once the server
// has asked for the body (100 Continue: the request passed authentication
// and its handler is reading the body); then it sends one byte of it and
// nothing more. The test's cleanup closes it.
func tricklePost(t *testing.T, addr, tok string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "POST /rest/sql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tok+
		"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	status, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 100 ") {
		t.Fatalf("trickler: got %q %v, want 100 Continue", status, err)
	}
	if _, err := io.WriteString(c, "{"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Time{})
	return c
}

// Issue 21: an address whose every connection trickles an authenticated
// request body (never quiet) is not locked out: /health and a real query
// from that address answer, again after the tricklers come back, because
// the connection whose unfinished request started first makes room.
func TestSlowlorisTricklingBodies(t *testing.T) {
	const perAddr = 8
	e := start(t, envOptions{config: func(c *config.Config) { c.MaxConnectionsPerAddress = perAddr }})
	tok := token("alice", "reader")
	addr := strings.TrimPrefix(e.base, "http://")
	// Fresh connections, as a client behind the trickling address makes;
	// the timeout only catches a server that does not answer.
	hc := &http.Client{Transport: testutil.Bearer{Token: tok, Base: &http.Transport{DisableKeepAlives: true}}, Timeout: 5 * time.Second}
	var first net.Conn
	for round := range 3 {
		// The address's every connection trickles (the newcomers push
		// out the last round's).
		for i := range perAddr {
			c := tricklePost(t, addr, tok)
			if round == 0 && i == 0 {
				first = c
			}
		}
		resp, err := hc.Get(e.base + "/health")
		if err != nil {
			t.Fatalf("round %d: /health from the trickling address: %v", round, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("round %d: /health: got %d, want 200", round, resp.StatusCode)
		}
		resp, err = hc.Post(e.base+"/rest/sql", "application/json",
			strings.NewReader(`{"database":"iot","sql":"SELECT count(*) AS n FROM devices"}`))
		if err != nil {
			t.Fatalf("round %d: a query from the trickling address: %v", round, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"rows"`) {
			t.Fatalf("round %d: a query: got %d %s, want 200 with rows", round, resp.StatusCode, body)
		}
	}
	// The first trickler was pushed out, not left to read_timeout.
	_ = first.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, first); err != nil {
		t.Errorf("the first trickler: got %v, want it closed by the server", err)
	}
}
