package integration

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/internal/testutil"
)

// clusterSecret is the replicas' signing key (cluster_secret) of the
// clusters the tests start.
const clusterSecret = "integration-cluster-secret-0123456789abcdef"

// clusterEnv is the environment of a replica of the test cluster: the
// test database as the cluster database, and the cluster secret.
func clusterEnv() []string {
	return []string{"LAKEGATE_CLUSTER_DSN=" + dbURL, "LAKEGATE_CLUSTER_SECRET=" + clusterSecret}
}

// Replicas sharing cluster_dsn share the MCP switch: switched through any
// replica, every replica follows, and one that starts later adopts it.
func TestClusterSwitch(t *testing.T) {
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "DROP TABLE IF EXISTS lakegate_cluster_state"); err != nil {
		t.Fatal(err)
	}
	conn.Close(t.Context())
	bin := buildBinary(t)
	a, b := startProc(t, bin, clusterEnv()...), startProc(t, bin, clusterEnv()...)
	client := newClient(t)
	admin := token("ops-alice", "admin")

	enabled := func(p *proc) bool {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", p.base+"/admin/mcp/status", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct{ Enabled bool }
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st.Enabled
	}
	// follow waits until every replica shows want and returns how long
	// that took.
	follow := func(want bool, ps ...*proc) time.Duration {
		t.Helper()
		start := time.Now()
		for _, p := range ps {
			testutil.Eventually(t, 10*time.Second-time.Since(start), fmt.Sprintf("%s to follow the switch to %v", p.base, want),
				func() bool { return enabled(p) == want })
		}
		return time.Since(start)
	}
	follow(true, a, b)

	// The command interface of one replica switches both.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", a.base+"/", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("command", "exit mcp server")
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("exit mcp server: %v %v", resp, err)
	}
	resp.Body.Close()
	t.Logf("off on both replicas %v after the command answered", follow(false, a, b))
	req, _ = http.NewRequestWithContext(t.Context(), "GET", b.base+"/mcp/sse", nil)
	req.Header.Set("Authorization", "Bearer "+token("agent", "reader"))
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/mcp/sse on the other replica: %v %v, want 503", resp, err)
	} else {
		resp.Body.Close()
	}

	// A replica started later with mcp_enabled adopts the recorded state.
	c := startProc(t, bin, clusterEnv()...)
	if enabled(c) {
		t.Error("a replica started later is on; the cluster is off")
	}
	// The admin route of another replica switches all three back on.
	req, _ = http.NewRequestWithContext(t.Context(), "POST", c.base+"/admin/mcp/enable", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("enable: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	t.Logf("on on all three replicas %v after the route answered", follow(true, a, b, c))
	if logs := a.stderr.String(); !strings.Contains(logs, `"action":"disable mcp","subject":"ops-alice"`) {
		t.Errorf("no admin action line on the replica that was asked:\n%s", logs)
	}
}

// signReplica signs r as another replica of a cluster with secret does
// (cluster/replica.go) for subject with roles: written here again, so
// that the test checks the wire format, not the package against itself.
func signReplica(r *http.Request, secret, subject string, roles ...string) {
	body, _ := json.Marshal(map[string]any{"sub": subject, "roles": roles})
	who := base64.RawURLEncoding.EncodeToString(body)
	exp := strconv.FormatInt(time.Now().Add(30*time.Second).Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "lakegate-replica\n%s\n%s\n%s\n%s", r.Method, r.URL.RequestURI(), exp, who)
	r.Header.Set("X-Lakegate-Replica", exp+"."+who+"."+hex.EncodeToString(m.Sum(nil)))
}

// A replica's signature, made with the cluster's own secret, opens a block
// read as a reader and nothing else: no admin switch, console, REST query,
// ingest or MCP route, and no admin power on a block. The secret is in no
// database; replicas still read each other's blocks and list the cluster's
// sessions (with the caller's own token).
func TestClusterReplicaSignature(t *testing.T) {
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	// An older version's key, left in the cluster database: deleted at start.
	for _, stmt := range []string{
		`CREATE TABLE IF NOT EXISTS lakegate_cluster_state (name text PRIMARY KEY, value text NOT NULL,
			changed_by text NOT NULL, changed_at timestamptz NOT NULL DEFAULT now(), version bigint NOT NULL DEFAULT 0)`,
		`INSERT INTO lakegate_cluster_state (name, value, changed_by) VALUES ('replica_secret', 'deadbeef', 'start') ON CONFLICT (name) DO UPDATE SET value = 'deadbeef'`,
	} {
		if _, err := conn.Exec(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	bin := buildBinary(t)
	a, b := startProc(t, bin, clusterEnv()...), startProc(t, bin, clusterEnv()...)
	tok, admin := token("agent", "reader"), token("ops", "admin")

	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM lakegate_cluster_state
		WHERE name = 'replica_secret' OR strpos(value, $1) > 0`, clusterSecret).Scan(&n); err != nil || n != 0 {
		t.Errorf("got %d rows holding a replica secret in the cluster database (%v), want 0", n, err)
	}

	// A transfer of agent's on replica a.
	br, _ := export(t, connectSSE(t, a.base, tok), "SELECT id, name FROM devices ORDER BY id", map[string]any{"export": true})
	id := br.Transfer.ID
	client := newClient(t)
	do := func(method, url, body string, sign func(*http.Request), tok string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		if sign != nil {
			sign(req)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got)
	}
	signed := func(subject string, roles ...string) func(*http.Request) {
		return func(r *http.Request) { signReplica(r, clusterSecret, subject, roles...) }
	}
	block := a.base + "/mcp/blocks/" + id + "/0"
	tests := []struct {
		name, method, url, body string
		sign                    func(*http.Request)
		tok                     string
		want                    int
	}{
		{"block, signed reader", "GET", block, "", signed("agent", "reader"), "", http.StatusOK},
		{"manifest, signed reader", "GET", a.base + "/mcp/blocks/" + id, "", signed("agent", "reader"), "", http.StatusOK},
		{"block, signed admin of another subject", "GET", block, "", signed("ops", "admin", "reader"), "", http.StatusNotFound},
		{"block, admin bearer of another subject", "GET", block, "", nil, admin, http.StatusOK},
		{"block, signed admin only", "GET", block, "", signed("agent", "admin"), "", http.StatusForbidden},
		{"block, forged", "GET", block, "", func(r *http.Request) { signReplica(r, strings.Repeat("x", 40), "agent", "reader") }, "", http.StatusUnauthorized},
		{"block, signed for another block", "GET", block, "", func(r *http.Request) {
			other, _ := http.NewRequest("GET", a.base+"/mcp/blocks/"+id+"/1", nil)
			signReplica(other, clusterSecret, "agent", "reader")
			r.Header.Set("X-Lakegate-Replica", other.Header.Get("X-Lakegate-Replica"))
		}, "", http.StatusUnauthorized},
		{"block, signature beside a bearer", "GET", block, "", signed("agent", "reader"), tok, http.StatusUnauthorized},
		{"admin switch", "POST", a.base + "/admin/mcp/disable", "", signed("ops", "admin"), "", http.StatusUnauthorized},
		{"console sessions", "GET", a.base + "/console/api/sessions", "", signed("ops", "admin"), "", http.StatusUnauthorized},
		{"console transfers", "GET", a.base + "/console/api/transfers", "", signed("agent", "reader"), "", http.StatusUnauthorized},
		{"rest sql", "POST", a.base + "/rest/sql", `{"database":"iot","sql":"SELECT 1"}`, signed("agent", "reader"), "", http.StatusUnauthorized},
		{"ingest", "POST", a.base + "/data/iot/devices", `[]`, signed("agent", "writer"), "", http.StatusUnauthorized},
		{"command", "POST", a.base + "/", "", signed("ops", "admin"), "", http.StatusUnauthorized},
		{"mcp", "POST", a.base + "/mcp", `{}`, signed("agent", "reader"), "", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, body := do(tt.method, tt.url, tt.body, tt.sign, tt.tok); code != tt.want {
				t.Errorf("got %d %s, want %d", code, body, tt.want)
			}
		})
	}
	if code, body := get(t, a.base+"/admin/mcp/status", admin); code != http.StatusOK || !strings.Contains(body, `"enabled":true`) {
		t.Errorf("MCP status after the signed disable: %d %s, want still enabled", code, body)
	}

	// What replicas sign for themselves still works: a session on b reads
	// a's block (Peers.Fetch), and the console on b lists a's session too
	// (with the admin's own token).
	cs := connectStreamableAt(t, b.base, tok, "2025-11-25")
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "get_result_block", Arguments: map[string]any{"transfer_id": id, "block": 0}})
	if err != nil || res.IsError || res.StructuredContent.(map[string]any)["crc32c"] != br.Transfer.Blocks[0].CRC32C {
		t.Fatalf("get_result_block on the other replica: %v %v", err, res)
	}
	var sessions struct{ Sessions []struct{ ID string } }
	consoleCall(t, b.base, "GET", "/console/api/sessions", admin, "", http.StatusOK, &sessions)
	onA := 0
	for _, si := range sessions.Sessions {
		if !strings.HasPrefix(si.ID, cs.ID()[:8]) {
			onA++
		}
	}
	if onA == 0 {
		t.Errorf("sessions listed on b: %+v, want a's SSE session among them", sessions.Sessions)
	}
}
