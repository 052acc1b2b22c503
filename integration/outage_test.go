package integration

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testutil"
)

// TestServeDatabaseDown: serve starts while its database refuses
// connections. It is alive (/health 200), not ready (/ready 503 naming the
// cause, with what to check), a query gets 503 with the cause and a
// Retry-After, the log says it once with the address; as soon as the
// database answers it is served, without a restart.
func TestServeDatabaseDown(t *testing.T) {
	bin := buildBinary(t)
	u, err := url.Parse(appURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testutil.NewProxy(t, u.Host)
	addr := proxy.Addr
	down := *u
	down.Host = addr
	p := startProc(t, bin, "LAKEGATE_DATABASES=iot="+down.String())
	if code, body := get(t, p.base+"/health", ""); code != http.StatusOK {
		t.Fatalf("GET /health: got %d %s, want 200", code, body)
	}
	var ready struct {
		Status    string            `json:"status"`
		Databases map[string]string `json:"databases"`
		Error     struct{ Message, Hint string }
	}
	code, body := get(t, p.base+"/ready", "")
	if err := json.Unmarshal([]byte(body), &ready); err != nil {
		t.Fatalf("GET /ready: %v: %s", err, body)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(ready.Databases["iot"], "connection refused") ||
		!strings.Contains(ready.Error.Message, "connection refused") || !strings.Contains(ready.Error.Hint, "PostgreSQL runs") {
		t.Fatalf("GET /ready: got %d %s, want 503 naming the cause and what to check", code, body)
	}
	if strings.Contains(body, addr) {
		t.Errorf("GET /ready shows the database's address: %s", body)
	}

	tok := token("agent", "reader")
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, p.base+"/rest/sql", strings.NewReader(`{"database":"iot","sql":"SELECT count(*) FROM devices"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var qe struct {
		Error struct{ Kind, Message, Hint string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&qe)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(qe.Error.Message, "connection refused") || qe.Error.Hint == "" {
		t.Fatalf("query while down: got %d %+v (Retry-After %q), want 503 with the cause, a hint and Retry-After",
			resp.StatusCode, qe, resp.Header.Get("Retry-After"))
	}

	proxy.Start(t)
	testutil.Eventually(t, 30*time.Second, "/ready to answer 200", func() bool {
		code, _ := get(t, p.base+"/ready", "")
		return code == http.StatusOK
	})
	if code, body := post(t, p.base+"/rest/sql", tok, `{"database":"iot","sql":"SELECT count(*) AS n FROM devices"}`); code != http.StatusOK {
		t.Fatalf("query once the database answers: got %d %s, want 200", code, body)
	}
	logs := p.stderr.String()
	if n := strings.Count(logs, "database is not served"); n != 1 || !strings.Contains(logs, addr) {
		t.Errorf("got %d outage lines in the log, want one naming the address:\n%s", n, logs)
	}
	if !strings.Contains(logs, "database answers: serving it") {
		t.Errorf("the log does not say the outage ended:\n%s", logs)
	}
}

// TestServeClusterDown: a replica whose cluster database does not answer
// at start serves on its own: /ready is 200 and says it is not in the
// cluster, and why; once the cluster database answers it joins.
func TestServeClusterDown(t *testing.T) {
	bin := buildBinary(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testutil.NewProxy(t, u.Host)
	down := *u
	down.Host = proxy.Addr
	p := startProc(t, bin, "LAKEGATE_CLUSTER_DSN="+down.String(), "LAKEGATE_CLUSTER_SECRET="+clusterSecret)
	type state struct {
		Status  string
		Cluster struct {
			Replica string
			Joined  bool
			Reason  string
		}
	}
	ready := func() (int, state) {
		code, body := get(t, p.base+"/ready", "")
		var st state
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("GET /ready: %v: %s", err, body)
		}
		return code, st
	}
	if code, st := ready(); code != http.StatusOK || st.Cluster.Joined || st.Cluster.Replica == "" ||
		!strings.Contains(st.Cluster.Reason, "does not answer") {
		t.Fatalf("GET /ready with the cluster database down: got %d %+v, want 200, not joined, and why", code, st)
	}
	proxy.Start(t)
	testutil.Eventually(t, 30*time.Second, "the replica to join the cluster", func() bool {
		_, st := ready()
		return st.Cluster.Joined
	})
	if logs := p.stderr.String(); !strings.Contains(logs, "this replica joined the cluster") {
		t.Errorf("the log does not say the replica joined:\n%s", logs)
	}
}
