package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

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
	shared := "LAKEGATE_CLUSTER_DSN=" + dbURL
	a, b := startProc(t, bin, shared), startProc(t, bin, shared)
	client := newClient(t)
	admin := token(t, "ops-alice", "admin")

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
			for enabled(p) != want {
				if time.Since(start) > 10*time.Second {
					t.Fatalf("%s did not follow the switch to %v", p.base, want)
				}
				time.Sleep(5 * time.Millisecond)
			}
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
	req.Header.Set("Authorization", "Bearer "+token(t, "agent", "reader"))
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/mcp/sse on the other replica: %v %v, want 503", resp, err)
	} else {
		resp.Body.Close()
	}

	// A replica started later with mcp_enabled adopts the recorded state.
	c := startProc(t, bin, shared)
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
