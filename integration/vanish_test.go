package integration

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/jobs"
)

// killableClient is an HTTP client whose connections can all be cut at
// once, as when the client's process dies.
type killableClient struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (k *killableClient) client(tok string) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			k.mu.Lock()
			k.conns = append(k.conns, c)
			k.mu.Unlock()
		}
		return c, err
	}}
	return &http.Client{Transport: testutil.Bearer{Token: tok, Base: tr}}
}

func (k *killableClient) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		c.Close()
	}
}

// httpTransports makes a go-sdk client transport to a server at base for
// each HTTP transport, over the client hc.
var httpTransports = []struct {
	name      string
	transport func(base string, hc *http.Client) mcpsdk.Transport
}{
	{"sse", func(base string, hc *http.Client) mcpsdk.Transport {
		return &mcpsdk.SSEClientTransport{Endpoint: base + "/mcp/sse", HTTPClient: hc}
	}},
	{"streamable http", func(base string, hc *http.Client) mcpsdk.Transport {
		return &mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, MaxRetries: -1}
	}},
}

// TestVanishedClientStopsItsQuery: when an MCP client dies mid-call (its
// connections drop), on legacy SSE or on Streamable HTTP, the tool call is
// cancelled and its query leaves PostgreSQL at once, instead of running to
// the statement timeout for nobody.
func TestVanishedClientStopsItsQuery(t *testing.T) {
	for _, tc := range httpTransports {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, envOptions{})
			var k killableClient
			client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "vanishing", Version: "1"}, nil)
			cs, err := client.Connect(t.Context(), tc.transport(e.base, k.client(token("alice", "reader"))),
				&mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			marker := "vanish_marker_" + strings.ReplaceAll(tc.name, " ", "_")
			called := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{
					"database": "iot", "sql": "SELECT count(*) AS n, '" + marker + "' AS m FROM generate_series(1, 2000000000) g"}})
				called <- err
			}()
			testutil.Eventually(t, 10*time.Second, "the marked query to run", func() bool { return activeQueries(t, e.pool, marker) == 1 })

			k.kill()
			gone := time.Now()
			// Left alone the query would count for a minute: gone within
			// 5 s, it was stopped. How fast is logged, not asserted.
			testutil.Eventually(t, 5*time.Second, "the marked query to end", func() bool { return activeQueries(t, e.pool, marker) == 0 })
			t.Logf("the query left PostgreSQL %v after the client went away", time.Since(gone).Round(time.Millisecond))
			if tc.name == "sse" {
				testutil.Eventually(t, 5*time.Second, "the SSE session to close", func() bool { return e.plugin.Status().Sessions["sse"] == 0 })
			}
			cs.Close()
			<-called
		})
	}
}

// TestVanishedClientKeepsItsExport: a client that dies while its export
// job is being written into blocks does not stop it: the job ends done,
// and its owner, back on a new session, finds it by id with its
// transfer, on both HTTP transports.
func TestVanishedClientKeepsItsExport(t *testing.T) {
	for _, tc := range httpTransports {
		t.Run(tc.name, func(t *testing.T) {
			e := blockEnv(t, blocktransport.Options{}, false)
			var k killableClient
			client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "vanishing", Version: "1"}, nil)
			cs, err := client.Connect(t.Context(), tc.transport(e.base, k.client(token("alice", "reader"))),
				&mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			// Seconds of rows: a correlated sum over 20,000 numbers per row.
			slow := "SELECT r.id, repeat('x', 500) AS pad, (SELECT sum(x) FROM generate_series(1, 20000 + r.id % 2) x) FROM readings r ORDER BY r.id"
			res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql",
				Arguments: map[string]any{"database": "iot", "sql": slow + " LIMIT 200", "export": true}})
			job, ok := jobOf(t, res)
			if err != nil || !ok {
				t.Fatalf("got %v %v, want an export job", res, err)
			}
			testutil.Eventually(t, 20*time.Second, "a transfer being written", func() bool { st := e.blocks.Stats(); return st.Bytes > 0 })
			k.kill()
			cs.Close()
			back := e.connectHTTP(t, token("alice", "reader"), "2025-11-25", nil)
			done, st := awaitJob(t, back, job.ID)
			var out struct {
				Transfer *blocktransport.Manifest
			}
			raw, _ := json.Marshal(done.StructuredContent)
			_ = json.Unmarshal(raw, &out)
			if st.State != jobs.Done || st.Rows != 200 || out.Transfer == nil || out.Transfer.Rows != 200 {
				t.Errorf("the job after its client vanished: got %s, %d rows, transfer %+v; want done with 200 rows", st.State, st.Rows, out.Transfer)
			}
			if st := e.blocks.Stats(); st.Aborted != 0 || st.Transfers != 1 {
				t.Errorf("block stats: %+v, want the transfer kept", st)
			}
		})
	}
}
