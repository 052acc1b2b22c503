package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/host"
)

// testCluster routes among replicas in this process as cluster.Peers
// does among processes: a request for an id goes to the replica its
// prefix names, a gather asks every other replica, and a request that
// came from another replica is marked and never sent on.
type testCluster struct {
	transport *http.Transport

	mu   sync.Mutex
	urls map[string]*url.URL // prefix → base URL
}

const testForwardedHeader = "X-Lakegate-Forwarded-By"

func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	cl := &testCluster{transport: &http.Transport{}, urls: map[string]*url.URL{}}
	t.Cleanup(cl.transport.CloseIdleConnections)
	return cl
}

// testReplica is the cluster as the replica with prefix (8 characters)
// sees it: its Replicas and its plugin's host.Peers.
type testReplica struct {
	cl     *testCluster
	prefix string
}

var (
	_ Replicas   = testReplica{}
	_ host.Peers = testReplica{}
)

func (r testReplica) Caller(*http.Request) (lakegate.Caller, bool, error) {
	return lakegate.Caller{}, false, nil
}

func (r testReplica) Prefix() string { return r.prefix }
func (r testReplica) Forwarded(req *http.Request) bool {
	return req.Header.Get(testForwardedHeader) != ""
}

func (r testReplica) Forward(w http.ResponseWriter, req *http.Request, id string) bool {
	if len(id) < len(r.prefix) || id[:len(r.prefix)] == r.prefix || r.Forwarded(req) {
		return false
	}
	r.cl.mu.Lock()
	target := r.cl.urls[id[:len(r.prefix)]]
	r.cl.mu.Unlock()
	if target == nil {
		return false
	}
	rp := &httputil.ReverseProxy{Transport: r.cl.transport, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Header.Set(testForwardedHeader, r.prefix)
	}}
	rp.ServeHTTP(w, req)
	return true
}

func (r testReplica) Gather(ctx context.Context, authorization, path string) [][]byte {
	r.cl.mu.Lock()
	var others []*url.URL
	for prefix, u := range r.cl.urls {
		if prefix != r.prefix {
			others = append(others, u)
		}
	}
	r.cl.mu.Unlock()
	var bodies [][]byte
	for _, u := range others {
		req, err := http.NewRequestWithContext(ctx, "GET", u.String()+path, nil)
		if err != nil {
			continue
		}
		req.Header.Set(testForwardedHeader, r.prefix)
		req.Header.Set("Authorization", authorization)
		resp, err := r.cl.transport.RoundTrip(req)
		if err != nil {
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			bodies = append(bodies, body)
		}
	}
	return bodies
}

func (r testReplica) Send(context.Context, lakegate.Caller, string, string, string) (*http.Response, error) {
	return nil, errors.New("no block reads between test replicas")
}

// startReplica is startWired as a replica of cl with prefix.
func startReplica(t *testing.T, cl *testCluster, prefix string, change func(*config.Config)) *wired {
	t.Helper()
	w := wire(t, change, &testReplica{cl: cl, prefix: prefix})
	u, _ := url.Parse(w.base)
	cl.mu.Lock()
	cl.urls[prefix] = u
	cl.mu.Unlock()
	return w
}

// The console's overview in a cluster: the cluster's view is the same
// whichever replica answers (sums, each replica's own figures beside
// them, latencies from the added histograms), and a replica's view is
// that replica's whichever replica the request lands on.
func TestConsoleClusterOverview(t *testing.T) {
	cl := newTestCluster(t)
	prefixes := []string{"aaaaaaaa", "bbbbbbbb", "cccccccc"}
	rs := map[string]*wired{}
	for _, p := range prefixes {
		rs[p] = startReplica(t, cl, p, nil)
	}
	a, b := rs["aaaaaaaa"], rs["bbbbbbbb"]
	admin, aliceTok := token("root", lakegate.RoleAdmin), token("alice", lakegate.RoleReader)
	alice := a.sse(t, aliceTok)
	bob := b.streamable(t, token("bob", lakegate.RoleReader))
	b.sse(t, token("carol", lakegate.RoleReader))
	call := func(cs *mcpsdk.ClientSession, n int) {
		for range n {
			if _, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_databases"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	call(alice, 3)
	call(bob, 2)
	// One worker of b is busy.
	release, err := b.limits.MCP().Acquire(lakegate.WithCaller(t.Context(), lakegate.Caller{Subject: "holder"}))
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	total := func(s *Series) (n int64) {
		for _, c := range s.Calls {
			n += c
		}
		return n
	}
	for _, p := range prefixes {
		var ov overview
		rs[p].do(t, "GET", "/console/api/overview", admin, "").decode(t, &ov)
		var got []string
		for _, f := range ov.Replicas {
			got = append(got, f.Replica)
		}
		if ov.Replica != "" || !slices.Equal(got, prefixes) {
			t.Fatalf("cluster's view from %s: replica %q, replicas %v; want none, and %v", p, ov.Replica, got, prefixes)
		}
		s := ov.Sessions
		if s.SSE != 2 || s.Streamable != 1 || s.Active != 3 || s.Idle != 0 || len(s.BySubject) != 3 ||
			s.BySubject[0].Subject != "alice" || s.BySubject[1].Subject != "bob" || s.BySubject[2].Subject != "carol" {
			t.Errorf("cluster's sessions from %s: %+v, want alice's SSE on a, bob's Streamable HTTP and carol's SSE on b", p, s)
		}
		if n := total(&ov.History.All); n != 5 {
			t.Errorf("cluster's tool calls from %s: %d, want 3 on a and 2 on b", p, n)
		}
		if ov.Workers.InUse != 1 || ov.Workers.Max != 3*config.DefaultMaxWorkers || ov.Replicas[1].Workers.InUse != 1 {
			t.Errorf("cluster's workers from %s: %+v (b: %+v), want 1 in use of 3 × %d, on b", p, ov.Workers, ov.Replicas[1].Workers, config.DefaultMaxWorkers)
		}
		if f := ov.Replicas[0]; f.Calls != 3 || f.Sessions != 1 || !f.MCPEnabled {
			t.Errorf("a's own figures from %s: %+v, want 3 calls and 1 session", p, f)
		}
		if len(ov.Databases) != 1 || ov.Databases[0].Circuit != "closed" || ov.Databases[0].Circuits["closed"] != 3 {
			t.Errorf("cluster's databases from %s: %+v, want demo closed on all 3", p, ov.Databases)
		}
		if !ov.MCP.Enabled || !slices.ContainsFunc(ov.History.All.P95MS, func(ms *float64) bool { return ms != nil }) {
			t.Errorf("cluster's MCP state and latency from %s: %+v, p95 %v", p, ov.MCP, ov.History.All.P95MS[historyMinutes-2:])
		}
		if ov.History.All.Buckets != nil {
			t.Errorf("the cluster's view from %s has histograms", p)
		}
	}
	// Each replica's view, asked of each replica.
	want := map[string]struct {
		calls    int64
		sessions int
	}{"aaaaaaaa": {3, 1}, "bbbbbbbb": {2, 2}, "cccccccc": {0, 0}}
	for _, from := range prefixes {
		for _, p := range prefixes {
			var ov overview
			rs[from].do(t, "GET", "/console/api/overview?replica="+p, admin, "").decode(t, &ov)
			if ov.Replica != p || len(ov.Replicas) != 0 || total(&ov.History.All) != want[p].calls ||
				ov.Sessions.SSE+ov.Sessions.Streamable != want[p].sessions {
				t.Errorf("replica %s's view from %s: replica %q, %d replicas, %d calls, %d sessions; want %s, none, %d, %d",
					p, from, ov.Replica, len(ov.Replicas), total(&ov.History.All), ov.Sessions.SSE+ov.Sessions.Streamable, p, want[p].calls, want[p].sessions)
			}
		}
	}
	for _, bad := range []string{"dddddddd", "aaaa", "aaaaaaaab"} {
		r := a.do(t, "GET", "/console/api/overview?replica="+bad, admin, "")
		if r.code != http.StatusNotFound || r.errBody(t).Error.Kind != lakegate.KindNotFound {
			t.Errorf("replica %q: %d %s, want 404 not_found", bad, r.code, r.body)
		}
	}
	// A reader sees the cluster's counts, and of the subjects only itself.
	var ov overview
	b.do(t, "GET", "/console/api/overview", aliceTok, "").decode(t, &ov)
	if ov.Sessions.SSE != 2 || len(ov.Sessions.BySubject) != 1 || ov.Sessions.BySubject[0].Subject != "alice" {
		t.Errorf("a reader's cluster view: %+v", ov.Sessions)
	}
}

// What does not add up: the MCP switch is on only when on everywhere, a
// circuit is the worst replica's, a database out of service says on how
// many, and each replica's own figures say where.
func TestMergeOverviews(t *testing.T) {
	since := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	later := since.Add(time.Second)
	db := func(circuit string, acquired int32) []databaseState {
		return []databaseState{{Name: "iot", Circuit: circuit, Pool: &poolState{Acquired: acquired, Max: 10}}}
	}
	parts := []overview{
		{Replica: "cccccccc", MCP: mcpState{Enabled: false, Since: &later}, Databases: []databaseState{{Name: "iot", Circuit: "open",
			Unavailable: "database iot does not answer", Pool: &poolState{Max: 10}}},
			Workers: host.WorkerStatus{Max: 10, InUse: 10, Waiting: 3}},
		{Replica: "aaaaaaaa", MCP: mcpState{Enabled: true, Since: &since}, Databases: db("closed", 2),
			Blocks: &host.BlockStatus{StoredNow: 2, StoredBytesNow: 100}, Workers: host.WorkerStatus{Max: 10}},
		{Replica: "bbbbbbbb", MCP: mcpState{Enabled: true, Since: &since}, Databases: db("half_open", 1),
			Blocks: &host.BlockStatus{StoredNow: 1, StoredBytesNow: 50}, Workers: host.WorkerStatus{Max: 10, InUse: 1}},
	}
	ov := mergeOverviews(later, parts)
	if ov.MCP.Enabled || ov.MCP.Since == nil || !ov.MCP.Since.Equal(later) {
		t.Errorf("MCP: %+v, want off (one replica is) since %v", ov.MCP, later)
	}
	d := ov.Databases
	if len(d) != 1 || d[0].Circuit != "open" || d[0].Circuits["open"] != 1 || d[0].Circuits["closed"] != 1 || d[0].Circuits["half_open"] != 1 ||
		d[0].Pool == nil || d[0].Pool.Acquired != 3 || d[0].Pool.Max != 30 || d[0].Unavailable != "on 1 of 3 replicas: database iot does not answer" {
		t.Errorf("databases: %+v (pool %+v), want iot open on 1 of 3, 3 of 30 connections", d, d[0].Pool)
	}
	if b := ov.Blocks; b == nil || b.StoredNow != 3 || b.StoredBytesNow != 150 {
		t.Errorf("blocks: %+v, want 3 transfers of 150 bytes", b)
	}
	if w := ov.Workers; w.Max != 30 || w.InUse != 11 || w.Waiting != 3 {
		t.Errorf("workers: %+v, want 11 of 30 in use, 3 waiting", w)
	}
	var order []string
	for _, r := range ov.Replicas {
		order = append(order, r.Replica)
	}
	if !slices.Equal(order, []string{"aaaaaaaa", "bbbbbbbb", "cccccccc"}) {
		t.Errorf("replicas: %v, want them by prefix", order)
	}
	if c := ov.Replicas[2]; c.MCPEnabled || c.Workers.InUse != 10 || !slices.Equal(c.OpenCircuits, []string{"iot"}) || !slices.Equal(c.Unavailable, []string{"iot"}) ||
		len(ov.Replicas[0].OpenCircuits) != 0 || len(ov.Replicas[1].Unavailable) != 0 {
		t.Errorf("cccccccc's own figures: %+v, want MCP off, 10 workers in use, iot's circuit open and iot unavailable", c)
	}
}
