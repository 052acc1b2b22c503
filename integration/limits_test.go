package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/testutil"
)

// Queries on devices wait while lockDevices (shutdown_test.go) holds its
// lock: they hold their worker slot without using CPU. Queries on
// readings do not wait.
const (
	blockedSQL = "SELECT count(*) AS n FROM devices"
	freeSQL    = "SELECT count(*) AS n FROM readings"
)

// limitAnswer is one answer of POST /rest/sql.
type limitAnswer struct {
	code   int
	header http.Header
	body   string
}

func restSQL(ctx context.Context, base, tok, sql string) (limitAnswer, error) {
	body, _ := json.Marshal(map[string]any{"database": "iot", "sql": sql})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/rest/sql", bytes.NewReader(body))
	if err != nil {
		return limitAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return limitAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return limitAnswer{resp.StatusCode, resp.Header, string(b)}, err
}

func mustREST(t *testing.T, e *env, tok, sql string) limitAnswer {
	t.Helper()
	a, err := restSQL(t.Context(), e.base, tok, sql)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// wantRetry checks an error answer: its code, kind, retry_after and
// Retry-After header, and that its message contains msg.
func wantRetry(t *testing.T, a limitAnswer, code int, kind lakegate.Kind, msg string) {
	t.Helper()
	var e struct {
		Error lakegate.ErrorBody `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || a.code != code || e.Error.Kind != kind {
		t.Fatalf("got %d %s, want %d with a %s error", a.code, a.body, code, kind)
	}
	if e.Error.RetryAfter <= 0 || !strings.Contains(e.Error.Message, msg) {
		t.Errorf("got %+v, want retry_after > 0 and a message about %q", e.Error, msg)
	}
	if n, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After: got %q, want whole seconds >= 1", a.header.Get("Retry-After"))
	}
}

// runSQLTool calls run_sql on iot.
func runSQLTool(ctx context.Context, cs *mcpsdk.ClientSession, sql string) (*mcpsdk.CallToolResult, error) {
	return cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": sql}})
}

// wantToolRetry checks a tool error of kind with retry_after whose message
// contains msg.
func wantToolRetry(t *testing.T, res *mcpsdk.CallToolResult, err error, kind lakegate.Kind, msg string) {
	t.Helper()
	if err != nil {
		t.Fatalf("got protocol error %v, want a %s tool error", err, kind)
	}
	var e struct {
		Error lakegate.ErrorBody `json:"error"`
	}
	if !res.IsError || len(res.Content) == 0 {
		t.Fatalf("got a result, want a %s tool error", kind)
	}
	text, _ := res.Content[0].(*mcpsdk.TextContent)
	if text == nil || json.Unmarshal([]byte(text.Text), &e) != nil {
		t.Fatalf("got content %+v, want a JSON error", res.Content[0])
	}
	if e.Error.Kind != kind || e.Error.RetryAfter <= 0 || !strings.Contains(e.Error.Message, msg) {
		t.Errorf("got %+v, want %s with retry_after and a message about %q", e.Error, kind, msg)
	}
}

// scrapeMetrics reads GET /metrics of e as an admin.
func scrapeMetrics(t *testing.T, e *env) map[string]*dto.MetricFamily {
	t.Helper()
	return scrapeMetricsAt(t, e.base)
}

// scrapeMetricsAt reads GET /metrics of the server at base as an admin.
func scrapeMetricsAt(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token("prometheus", "admin"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: got %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// metricValue is the value of the counter or gauge series of name with
// the given label pairs, failing the test when it is missing.
func metricValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
next:
	for _, m := range fams[name].GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			ok := false
			for _, lp := range m.GetLabel() {
				ok = ok || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
			}
			if !ok {
				continue next
			}
		}
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	t.Fatalf("no series %s%v in /metrics", name, labels)
	return 0
}

// TestPoolExhaustion: MCP holding its whole share of the shared pool
// leaves REST served; a call that waits worker_wait for a slot is answered
// unavailable with retry_after, on MCP and on REST.
func TestPoolExhaustion(t *testing.T) {
	e := start(t, envOptions{config: func(c *config.Config) {
		c.MaxWorkers, c.MCPMaxWorkers = 3, 2
		c.WorkerWait = config.Duration(300 * time.Millisecond)
	}})
	tok := token("agent", "reader")
	cs := e.connect(t, tok)
	unlock := lockDevices(t, e.pool)

	// Two tool calls wait on the lock, holding MCP's two slots.
	var wg sync.WaitGroup
	held := make(chan error, 3)
	for range 2 {
		wg.Go(func() {
			res, err := runSQLTool(t.Context(), cs, blockedSQL)
			if err == nil && res.IsError {
				err = errors.New(res.Content[0].(*mcpsdk.TextContent).Text)
			}
			held <- err
		})
	}
	testutil.Eventually(t, 10*time.Second, "MCP's two workers in use", func() bool { return e.plugin.Status().Workers.InUse == 2 })

	res, err := runSQLTool(t.Context(), cs, freeSQL)
	wantToolRetry(t, res, err, lakegate.KindUnavailable, "MCP workers")
	if a := mustREST(t, e, token("client", "reader"), freeSQL); a.code != http.StatusOK {
		t.Fatalf("REST while MCP holds its share: got %d %s, want 200", a.code, a.body)
	}

	// A REST query takes the last slot; the next waits and is refused.
	wg.Go(func() {
		a, err := restSQL(t.Context(), e.base, token("client", "reader"), blockedSQL)
		if err == nil && a.code != http.StatusOK {
			err = errors.New(a.body)
		}
		held <- err
	})
	testutil.Eventually(t, 10*time.Second, "the pool's three workers in use", func() bool { return e.plugin.Status().Workers.PoolInUse == 3 })
	wantRetry(t, mustREST(t, e, token("client2", "reader"), freeSQL), http.StatusServiceUnavailable, lakegate.KindUnavailable, "database workers")

	fams := scrapeMetrics(t, e)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"lakegate_worker_wait_timeouts_total", []string{"origin", "mcp"}, 1},
		{"lakegate_worker_wait_timeouts_total", []string{"origin", "rest"}, 1},
		{"lakegate_workers_in_use", []string{"origin", "mcp"}, 2},
		{"lakegate_workers_in_use", []string{"origin", "rest"}, 1},
		{"lakegate_workers_max", []string{"pool", "all"}, 3},
		{"lakegate_db_pool_connections", []string{"database", "iot", "state", "acquired"}, 3},
		{"lakegate_db_circuit_state", []string{"database", "iot", "state", "closed"}, 1},
	} {
		if got := metricValue(t, fams, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v: got %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}

	unlock()
	wg.Wait()
	close(held)
	for err := range held {
		if err != nil {
			t.Errorf("a call that held a slot: got %v, want its result once the lock went", err)
		}
	}
	if got := e.plugin.Status().Workers; got.InUse != 0 || got.PoolInUse != 0 {
		t.Errorf("workers after: got %+v, want none in use", got)
	}
}

// TestQueriesPerSubject: a subject running max_queries_per_subject
// queries is refused another (429 on REST, rate_limited on MCP); other
// subjects are not.
func TestQueriesPerSubject(t *testing.T) {
	e := start(t, envOptions{config: func(c *config.Config) { c.MaxQueriesPerSubject = 1 }})
	alice := token("alice", "reader")
	unlock := lockDevices(t, e.pool)
	first := make(chan limitAnswer, 1)
	go func() {
		a, _ := restSQL(t.Context(), e.base, alice, blockedSQL)
		first <- a
	}()
	testutil.Eventually(t, 10*time.Second, "one pool worker in use", func() bool { return e.plugin.Status().Workers.PoolInUse == 1 })

	wantRetry(t, mustREST(t, e, alice, freeSQL), http.StatusTooManyRequests, lakegate.KindRateLimited, "queries at once")
	res, err := runSQLTool(t.Context(), e.connect(t, alice), freeSQL)
	wantToolRetry(t, res, err, lakegate.KindRateLimited, "queries at once")
	if a := mustREST(t, e, token("bob", "reader"), freeSQL); a.code != http.StatusOK {
		t.Errorf("another subject: got %d %s, want 200", a.code, a.body)
	}

	unlock()
	if a := <-first; a.code != http.StatusOK {
		t.Fatalf("the running query: got %d %s, want 200", a.code, a.body)
	}
	if a := mustREST(t, e, alice, freeSQL); a.code != http.StatusOK {
		t.Errorf("after it finished: got %d %s, want 200", a.code, a.body)
	}
	if got := metricValue(t, scrapeMetrics(t, e), "lakegate_rate_limited_total", "limit", "queries"); got != 2 {
		t.Errorf("lakegate_rate_limited_total{limit=queries}: got %v, want 2", got)
	}
}

// TestReady: /ready is 200 while the database answers, and 503 naming the
// database once it does not (its address then refuses connections).
func TestReady(t *testing.T) {
	u, err := url.Parse(appURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testutil.NewProxy(t, u.Host)
	proxy.Start(t)
	proxied := *u
	proxied.Host = proxy.Addr
	e := start(t, envOptions{config: func(c *config.Config) {
		c.Databases = []config.Database{{Name: "iot", URL: proxied.String()}}
	}})

	ready := func() (int, map[string]any) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.base+"/ready", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("GET /ready: body is not JSON: %v", err)
		}
		return resp.StatusCode, body
	}
	if code, body := ready(); code != http.StatusOK || body["status"] != "ready" {
		t.Fatalf("database up: got %d %v, want 200 ready", code, body)
	}

	proxy.Stop()
	var body map[string]any
	// Answers are cached for a second: wait for a fresh check.
	testutil.Eventually(t, 15*time.Second, "/ready to answer 503", func() bool {
		var code int
		code, body = ready()
		return code == http.StatusServiceUnavailable
	})
	dbs, _ := body["databases"].(map[string]any)
	if msg, _ := dbs["iot"].(string); msg == "" || msg == "ok" || !strings.Contains(msg, "iot") || !strings.Contains(msg, "connection refused") {
		t.Errorf("got databases %v, want iot named as failing, with the cause", body["databases"])
	}
	if strings.Contains(mustJSON(t, body), proxied.Host) {
		t.Errorf("the answer shows the database address: %v", body)
	}
	if code, _ := ready(); code != http.StatusServiceUnavailable {
		t.Errorf("got %d, want 503 while the database is down", code)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.base+"/health", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /health while the database is down: got %v %v, want 200 (alive)", resp, err)
	} else {
		resp.Body.Close()
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
