package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/testutil"
)

// scrape reads GET /metrics (as an admin) into metric families.
func scrape(t *testing.T, w *wired) map[string]*dto.MetricFamily {
	t.Helper()
	r := w.do(t, "GET", "/metrics", token("prometheus", lakegate.RoleAdmin), "")
	if r.code != http.StatusOK {
		t.Fatalf("GET /metrics: got %d %s, want 200", r.code, r.body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// find returns the series of family name whose labels include the given
// name/value pairs, or nil.
func find(fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is the value of a counter or gauge series (a histogram's count),
// failing the test when the series is missing.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	m := find(fams, name, labels...)
	if m == nil {
		t.Fatalf("no series %s%v in /metrics", name, labels)
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("%s: not a counter, gauge or histogram", name)
	return 0
}

func TestMetricsAfterRealCalls(t *testing.T) {
	w := startWired(t, nil)
	reader := token("alice", lakegate.RoleReader)
	if r := w.do(t, "GET", "/rest/databases/demo/tables", reader, ""); r.code != http.StatusOK {
		t.Fatalf("tables: got %d %s", r.code, r.body)
	}
	r := w.do(t, "POST", "/rest/sql", reader, sqlJSON(t, "demo", "SELECT id FROM devices ORDER BY id", 5))
	if r.code != http.StatusOK {
		t.Fatalf("sql: got %d %s", r.code, r.body)
	}
	if r := w.do(t, "GET", "/no/such/path/42", reader, ""); r.code != http.StatusNotFound {
		t.Fatalf("unknown path: got %d, want 404", r.code)
	}
	cs := w.sse(t, reader)
	callOK(t, cs, "list_tables", map[string]any{"database": "demo"})
	toolError(t, cs, "describe_table", map[string]any{"database": "demo", "table": "nope"})

	fams := scrape(t, w)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"lakegate_http_requests_total", []string{"route", "/rest/databases/:db/tables", "method", "GET", "status", "200"}, 1},
		{"lakegate_http_requests_total", []string{"route", "/rest/sql", "method", "POST", "status", "200"}, 1},
		{"lakegate_http_requests_total", []string{"route", "unmatched", "method", "GET", "status", "404"}, 1},
		{"lakegate_http_request_duration_seconds", []string{"route", "/rest/sql", "method", "POST"}, 1},
		{"lakegate_mcp_tool_calls_total", []string{"tool", "list_tables", "outcome", "ok"}, 1},
		{"lakegate_mcp_tool_calls_total", []string{"tool", "describe_table", "outcome", "not_found"}, 1},
		{"lakegate_mcp_tool_call_duration_seconds", []string{"tool", "list_tables", "outcome", "ok"}, 1},
		{"lakegate_mcp_sessions_open", []string{"transport", "sse"}, 1},
		{"lakegate_mcp_sessions_open", []string{"transport", "streamable"}, 0},
		{"lakegate_rows_returned_total", []string{"origin", "rest"}, 5},
		{"lakegate_query_duration_seconds", []string{"origin", "rest"}, 2},
		{"lakegate_query_duration_seconds", []string{"origin", "mcp"}, 2},
		{"lakegate_workers_max", []string{"pool", "all"}, config.DefaultPoolWorkers},
		{"lakegate_workers_max", []string{"pool", "mcp"}, config.DefaultMaxWorkers},
		{"lakegate_workers_in_use", []string{"origin", "mcp"}, 0},
		{"lakegate_workers_waiting", []string{"origin", "rest"}, 0},
		{"lakegate_rate_limited_total", []string{"limit", "queries"}, 0},
		{"lakegate_db_circuit_state", []string{"database", "demo", "state", "closed"}, 1},
		{"lakegate_db_circuit_state", []string{"database", "demo", "state", "open"}, 0},
		{"lakegate_mcp_enabled", nil, 1},
	} {
		if got := value(t, fams, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v: got %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	for _, origin := range []string{"rest", "mcp"} {
		if got := value(t, fams, "lakegate_bytes_returned_total", "origin", origin); got <= 0 {
			t.Errorf("bytes returned (%s): got %v, want > 0", origin, got)
		}
	}
	if got := value(t, fams, "lakegate_rows_returned_total", "origin", "mcp"); got != 0 {
		t.Errorf("rows returned (mcp): got %v, want 0 (list_tables has no rows)", got)
	}
	// Route labels are patterns, never raw paths.
	for _, m := range fams["lakegate_http_requests_total"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "route" && (strings.Contains(lp.GetValue(), "demo") || strings.Contains(lp.GetValue(), "42")) {
				t.Errorf("route label %q is a raw path", lp.GetValue())
			}
		}
	}
	if fams["go_goroutines"] == nil || fams["process_open_fds"] == nil && fams["process_cpu_seconds_total"] == nil {
		t.Error("the Go runtime and process collectors are missing")
	}
}

func TestMetricsAuth(t *testing.T) {
	for _, tc := range []struct {
		name     string
		auth     bool
		role     string // "": no token
		wantCode int
	}{
		{"default needs a token", true, "", http.StatusUnauthorized},
		{"default needs the admin role", true, lakegate.RoleReader, http.StatusForbidden},
		{"admin", true, lakegate.RoleAdmin, http.StatusOK},
		{"open when metrics_auth is false", false, "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := startWired(t, func(c *config.Config) { c.MetricsAuth = tc.auth })
			tok := ""
			if tc.role != "" {
				tok = token("scraper", tc.role)
			}
			r := w.do(t, "GET", "/metrics", tok, "")
			if r.code != tc.wantCode {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tc.wantCode)
			}
			if tc.wantCode == http.StatusOK && !bytes.Contains(r.body, []byte("# TYPE lakegate_rate_limited_total counter")) {
				t.Errorf("got a body without lakegate's metrics")
			}
		})
	}
}

func TestReadyAndHealth(t *testing.T) {
	w := startWired(t, nil)
	r := w.do(t, "GET", "/ready", "", "")
	var got struct {
		Status    string            `json:"status"`
		Databases map[string]string `json:"databases"`
	}
	r.decode(t, &got)
	if r.code != http.StatusOK || got.Status != "ready" || got.Databases["demo"] != "ok" {
		t.Errorf("GET /ready: got %d %s, want 200 ready with demo ok", r.code, r.body)
	}
	if r := w.do(t, "GET", "/health", "", ""); r.code != http.StatusOK {
		t.Errorf("GET /health: got %d, want 200", r.code)
	}
}

// TestToolCallLogIDs checks that a tool call's log line names its HTTP
// request, its session and its JSON-RPC id, on both HTTP transports.
func TestToolCallLogIDs(t *testing.T) {
	w := startWired(t, nil)
	tok := token("alice", lakegate.RoleReader)
	for _, tc := range []struct {
		transport string
		connect   func(*testing.T, string) *mcpsdk.ClientSession
		tool      string // one per case, to find its line
		args      map[string]any
	}{
		{"sse", w.sse, "list_databases", nil},
		{"streamable", w.streamable, "list_tables", map[string]any{"database": "demo"}},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			cs := tc.connect(t, tok)
			callOK(t, cs, tc.tool, tc.args)
			line := findLog(t, w.logs, "tool call", "tool", tc.tool)
			if sid, _ := line["session_id"].(string); sid == "" || (cs.ID() != "" && sid != cs.ID()) {
				t.Errorf("session_id: got %q, want the session's id (client sees %q)", sid, cs.ID())
			}
			rid, _ := line["request_id"].(string)
			if !strings.HasPrefix(rid, "rid-") {
				t.Errorf("request_id: got %q, want the X-Request-ID of the POST (rid-N)", rid)
			}
			if id, _ := line["jsonrpc_id"].(string); id == "" {
				t.Errorf("jsonrpc_id: missing in %v", line)
			}
		})
	}
}

// findLog returns the first JSON log line with message msg whose fields
// include the given key/value pairs.
func findLog(t *testing.T, logs *testutil.Buffer, msg string, kv ...string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(nil, 1<<20)
next:
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["msg"] != msg {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if v, _ := line[kv[i]].(string); v != kv[i+1] {
				continue next
			}
		}
		return line
	}
	t.Fatalf("no log line %q with %v in:\n%s", msg, kv, logs.String())
	return nil
}
