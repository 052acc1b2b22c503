package integration

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it decodes what
// an exporter sends (protobuf ExportTraceServiceRequest on POST
// /v1/traces) with the official generated types, and keeps the spans and
// the raw bodies.
type otlpReceiver struct {
	srv      *httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
	bodies   [][]byte
}

// startReceiver serves an otlpReceiver on ln, or on a loopback port of its
// own when ln is nil; closed when the test ends.
func startReceiver(t *testing.T, ln net.Listener) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	if ln != nil {
		r.srv.Listener.Close()
		r.srv.Listener = ln
	}
	r.srv.Start()
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	msg := &collectortrace.ExportTraceServiceRequest{}
	if err != nil || req.Method != http.MethodPost || req.URL.Path != "/v1/traces" ||
		req.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(raw, msg) != nil {
		http.Error(w, "want a protobuf ExportTraceServiceRequest on POST /v1/traces", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, raw)
	for _, rs := range msg.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				r.services = append(r.services, kv.Value.GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// find returns the spans named name in trace traceID (any trace if "").
func (r *otlpReceiver) find(name, traceID string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if s.Name == name && (traceID == "" || hex.EncodeToString(s.TraceId) == traceID) {
			out = append(out, s)
		}
	}
	return out
}

// children returns the spans named name whose parent is parent.
func (r *otlpReceiver) children(parent *tracepb.Span, name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range r.find(name, hex.EncodeToString(parent.TraceId)) {
		if bytes.Equal(s.ParentSpanId, parent.SpanId) {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// one returns the only span of spans, or fails.
func one(t *testing.T, what string, spans []*tracepb.Span) *tracepb.Span {
	t.Helper()
	if len(spans) != 1 {
		t.Fatalf("%s: got %d spans, want 1", what, len(spans))
	}
	return spans[0]
}

// traceparent is a W3C traceparent of a fresh sampled remote span: the
// header, its trace id and its span id.
func traceparent(n byte) (header, traceID, spanID string) {
	traceID = fmt.Sprintf("%016x%016x", uint64(0x6c616b6567617465), uint64(n)+1)
	spanID = fmt.Sprintf("%016x", uint64(0x5370616e00)+uint64(n))
	return "00-" + traceID + "-" + spanID + "-01", traceID, spanID
}

// traceHeaders adds a bearer token to every request and, while set, a
// traceparent header.
type traceHeaders struct {
	token  string
	parent atomic.Pointer[string]
	base   http.RoundTripper
}

func (h *traceHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.token)
	if p := h.parent.Load(); p != nil {
		r.Header.Set("traceparent", *p)
	}
	return h.base.RoundTrip(r)
}

func newTraceClient(t *testing.T, tok string) (*http.Client, *traceHeaders) {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	h := &traceHeaders{token: tok, base: tr}
	return &http.Client{Transport: h, Timeout: time.Minute}, h
}

// secretParam is a bind parameter's value: it must appear in no span.
const secretParam = "secret-value-123"

// TestOTelTraces runs the real binary with an OTLP endpoint on loopback and
// follows one REST query, Streamable HTTP tool calls (parent in _meta, in
// the traceparent header, a result in blocks and a block read) and a
// legacy SSE tool call from the HTTP route to the query; then, with the
// variables unset or the SDK disabled, checks that nothing is sent.
func TestOTelTraces(t *testing.T) {
	bin := buildBinary(t)
	t.Run("exported", func(t *testing.T) { testTracesExported(t, bin) })
	t.Run("unset", func(t *testing.T) { testTracesUnset(t, bin) })
}

func testTracesExported(t *testing.T, bin string) {
	rec := startReceiver(t, nil)
	p := startProc(t, bin, "OTEL_EXPORTER_OTLP_ENDPOINT="+rec.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=50")
	ctx := t.Context()
	client, headers := newTraceClient(t, token("ada", "reader"))

	// REST, parent in the traceparent header.
	restTP, restTrace, restParent := traceparent(0)
	headers.parent.Store(&restTP)
	body := fmt.Sprintf(`{"database":"iot","sql":"SELECT id, status FROM readings WHERE status <> $1 ORDER BY id LIMIT 3","params":[%q]}`, secretParam)
	resp, err := client.Post(p.base+"/rest/sql", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /rest/sql: got %d", resp.StatusCode)
	}
	headers.parent.Store(nil)

	// Streamable HTTP: one call with its parent in _meta, one in the header.
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "otel-it", Version: "1"}, nil).Connect(ctx,
		&mcpsdk.StreamableClientTransport{Endpoint: p.base + "/mcp", HTTPClient: client, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"database": "iot", "sql": "SELECT id FROM readings WHERE status <> $1 ORDER BY id", "params": []any{secretParam}, "max_rows": 5}
	metaTP, metaTrace, metaParent := traceparent(1)
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: args, Meta: mcpsdk.Meta{"traceparent": metaTP}})
	if err != nil || res.IsError {
		t.Fatalf("run_sql with _meta: %v %v", err, res)
	}
	hdrTP, hdrTrace, hdrParent := traceparent(2)
	headers.parent.Store(&hdrTP)
	exportArgs := map[string]any{"database": "iot", "sql": "SELECT * FROM readings ORDER BY id", "max_rows": 100, "export": true}
	var out struct {
		Transfer struct {
			ID string `json:"transfer_id"`
		} `json:"transfer"`
	}
	res, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: exportArgs})
	headers.parent.Store(nil)
	if err != nil || res.IsError {
		t.Fatalf("run_sql export: %v %v", err, res)
	}
	// An export job: its spans are the call's children all the same.
	if job, ok := jobOf(t, res); ok {
		res, _ = awaitJob(t, cs, job.ID)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil || out.Transfer.ID == "" {
		t.Fatalf("run_sql export: no transfer in %s", raw)
	}
	cs.Close()

	// A block read over HTTP.
	blockTP, blockTrace, blockParent := traceparent(3)
	headers.parent.Store(&blockTP)
	resp, err = client.Get(p.base + "/mcp/blocks/" + out.Transfer.ID + "/0")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	headers.parent.Store(nil)
	if resp.StatusCode != http.StatusOK || n == 0 {
		t.Fatalf("GET block 0: got %d, %d bytes", resp.StatusCode, n)
	}

	// Legacy SSE: the POST's traceparent header reaches the call's span.
	sseClient, sseHeaders := newTraceClient(t, token("ada", "reader"))
	sseTP, sseTrace, sseParent := traceparent(4)
	sseHeaders.parent.Store(&sseTP)
	ss, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "otel-it", Version: "1"}, nil).Connect(ctx,
		&mcpsdk.SSEClientTransport{Endpoint: p.base + "/mcp/sse", HTTPClient: sseClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := ss.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: args}); err != nil || res.IsError {
		t.Fatalf("run_sql over SSE: %v %v", err, res)
	}
	ss.Close()

	// Exit: the last spans are flushed at shutdown.
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("lakegate exited with %d: %s", code, p.stderr.String())
	}

	// REST: the HTTP span is the header's child, the query the HTTP span's.
	httpSpan := one(t, "REST HTTP span", rec.find("POST /rest/sql", restTrace))
	if hex.EncodeToString(httpSpan.ParentSpanId) != restParent || httpSpan.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("POST /rest/sql: got parent %x kind %v, want %s server", httpSpan.ParentSpanId, httpSpan.Kind, restParent)
	}
	if v := spanAttr(httpSpan, "http.route"); v.GetStringValue() != "/rest/sql" {
		t.Errorf("POST /rest/sql: got http.route %v", v)
	}
	if v := spanAttr(httpSpan, "http.response.status_code"); v.GetIntValue() != 200 {
		t.Errorf("POST /rest/sql: got status code %v", v)
	}
	q := one(t, "REST query span", rec.children(httpSpan, "SELECT iot"))
	checkQuerySpan(t, q, 3)

	// _meta: the tool call's parent is the client's span, with a link to
	// the HTTP request that carried it; the query is the call's child.
	call := one(t, "tools/call with _meta", rec.find("tools/call run_sql", metaTrace))
	if hex.EncodeToString(call.ParentSpanId) != metaParent {
		t.Errorf("tools/call with _meta: got parent %x, want %s", call.ParentSpanId, metaParent)
	}
	if v := spanAttr(call, "gen_ai.tool.name"); v.GetStringValue() != "run_sql" {
		t.Errorf("tools/call: got gen_ai.tool.name %v", v)
	}
	if len(call.Links) != 1 {
		t.Errorf("tools/call with _meta: got %d links, want 1 (its HTTP request)", len(call.Links))
	} else {
		link := call.Links[0]
		var found bool
		for _, s := range rec.find("POST /mcp", hex.EncodeToString(link.TraceId)) {
			found = found || bytes.Equal(s.SpanId, link.SpanId)
		}
		if !found {
			t.Errorf("tools/call with _meta: its link %x names no POST /mcp span", link.SpanId)
		}
	}
	checkQuerySpan(t, one(t, "query of the _meta call", rec.children(call, "SELECT iot")), 5)

	// Header: HTTP span → tools/call → query and block write.
	post := one(t, "POST /mcp with traceparent", rec.find("POST /mcp", hdrTrace))
	if hex.EncodeToString(post.ParentSpanId) != hdrParent {
		t.Errorf("POST /mcp: got parent %x, want %s", post.ParentSpanId, hdrParent)
	}
	call = one(t, "tools/call under POST /mcp", rec.children(post, "tools/call run_sql"))
	checkQuerySpan(t, one(t, "query of the export call", rec.children(call, "SELECT iot")), 100)
	write := one(t, "block write", rec.children(call, "block write"))
	if v := spanAttr(write, "lakegate.transfer.id"); v.GetStringValue() != out.Transfer.ID {
		t.Errorf("block write: got transfer id %v, want %s", v, out.Transfer.ID)
	}
	if spanAttr(write, "lakegate.transfer.blocks").GetIntValue() < 1 || spanAttr(write, "lakegate.transfer.rows").GetIntValue() != 100 {
		t.Errorf("block write: got attributes %v, want blocks and 100 rows", write.Attributes)
	}

	// The block read: its HTTP route's child.
	get := one(t, "GET block", rec.find("GET /mcp/blocks/:id/:n", blockTrace))
	if hex.EncodeToString(get.ParentSpanId) != blockParent {
		t.Errorf("GET block: got parent %x, want %s", get.ParentSpanId, blockParent)
	}
	read := one(t, "block read", rec.children(get, "block read"))
	if spanAttr(read, "lakegate.transfer.bytes").GetIntValue() != n {
		t.Errorf("block read: got attributes %v, want %d bytes", read.Attributes, n)
	}

	// Legacy SSE: the POST /mcp/messages/ span is the call's parent.
	msgPost := one(t, "POST /mcp/messages/ carrying the call", postsWithChild(rec, sseTrace, "tools/call run_sql"))
	if hex.EncodeToString(msgPost.ParentSpanId) != sseParent {
		t.Errorf("POST /mcp/messages/: got parent %x, want %s", msgPost.ParentSpanId, sseParent)
	}
	sseCall := one(t, "tools/call over SSE", rec.children(msgPost, "tools/call run_sql"))
	if v := spanAttr(sseCall, "mcp.session.id"); v.GetStringValue() == "" {
		t.Error("tools/call over SSE: no mcp.session.id")
	}
	checkQuerySpan(t, one(t, "query of the SSE call", rec.children(sseCall, "SELECT iot")), 5)

	// No span holds the bind parameter or the SQL text.
	rec.mu.Lock()
	for _, b := range rec.bodies {
		for _, secret := range []string{secretParam, "FROM readings"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("an export holds %q", secret)
			}
		}
	}
	if len(rec.services) == 0 || rec.services[0] != "lakegate" {
		t.Errorf("got service names %v, want lakegate", rec.services)
	}
	rec.mu.Unlock()

	// The JSON log lines of the requests carry their trace ids.
	logs := p.stderr.String()
	for _, want := range []struct{ msg, trace string }{
		{`"msg":"http request"`, restTrace},
		{`"msg":"tool call"`, metaTrace},
		{`"msg":"tool call"`, hdrTrace},
	} {
		if !logLineWith(logs, want.msg, `"trace_id":"`+want.trace+`"`, `"span_id":"`) {
			t.Errorf("no log line %s with trace_id %s in:\n%s", want.msg, want.trace, logs)
		}
	}
}

// postsWithChild returns the POST /mcp/messages/ spans of trace traceID
// with a child named child.
func postsWithChild(rec *otlpReceiver, traceID, child string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range rec.find("POST /mcp/messages/", traceID) {
		if len(rec.children(s, child)) == 1 {
			out = append(out, s)
		}
	}
	return out
}

// checkQuerySpan checks a query span's attributes: PostgreSQL, database
// iot, a fingerprint, rows, bytes.
func checkQuerySpan(t *testing.T, s *tracepb.Span, rows int64) {
	t.Helper()
	if s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("query span: got kind %v, want client", s.Kind)
	}
	if v := spanAttr(s, "db.system.name"); v.GetStringValue() != "postgresql" {
		t.Errorf("query span: got db.system.name %v", v)
	}
	if v := spanAttr(s, "db.namespace"); v.GetStringValue() != "iot" {
		t.Errorf("query span: got db.namespace %v", v)
	}
	if v := spanAttr(s, "lakegate.db.statement.fingerprint"); len(v.GetStringValue()) != 16 {
		t.Errorf("query span: got fingerprint %v", v)
	}
	if v := spanAttr(s, "db.response.returned_rows"); v.GetIntValue() != rows {
		t.Errorf("query span: got rows %v, want %d", v, rows)
	}
	if v := spanAttr(s, "lakegate.db.response.bytes"); v.GetIntValue() <= 0 {
		t.Errorf("query span: got bytes %v", v)
	}
}

// logLineWith reports whether one line of logs holds every part.
func logLineWith(logs string, parts ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// testTracesUnset runs the binary with no OTLP endpoint (a receiver on
// the exporter's default address, 127.0.0.1:4318, when that port is free,
// so that a pipeline built by mistake would be seen) and with an endpoint
// but OTEL_SDK_DISABLED=true: after a REST query and a tool call, and the
// server's exit, neither receiver got a request.
func testTracesUnset(t *testing.T, bin string) {
	var def *otlpReceiver
	if ln, err := net.Listen("tcp", "127.0.0.1:4318"); err == nil {
		def = startReceiver(t, ln)
	} else {
		t.Logf("127.0.0.1:4318 is taken (%v): checking the named receiver only", err)
	}
	named := startReceiver(t, nil)
	for _, env := range [][]string{
		{"OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=lakegate-it"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=" + named.srv.URL, "OTEL_SDK_DISABLED=true", "OTEL_BSP_SCHEDULE_DELAY=50"},
	} {
		p := startProc(t, bin, env...)
		client, headers := newTraceClient(t, token("ada", "reader"))
		tp, _, _ := traceparent(5)
		headers.parent.Store(&tp)
		resp, err := client.Post(p.base+"/rest/sql", "application/json", strings.NewReader(`{"database":"iot","sql":"SELECT 1"}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "otel-it", Version: "1"}, nil).Connect(t.Context(),
			&mcpsdk.StreamableClientTransport{Endpoint: p.base + "/mcp", HTTPClient: client, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_databases", Meta: mcpsdk.Meta{"traceparent": tp}}); err != nil {
			t.Fatal(err)
		}
		cs.Close()
		p.signal(syscall.SIGTERM)
		if code := p.wait(30 * time.Second); code != 0 {
			t.Fatalf("lakegate exited with %d: %s", code, p.stderr.String())
		}
		if logs := p.stderr.String(); strings.Contains(logs, `"trace_id"`) || strings.Contains(logs, "exporting traces") {
			t.Errorf("%v: tracing is on in the logs:\n%s", env, logs)
		}
	}
	if n := named.requests.Load(); n != 0 {
		t.Errorf("OTEL_SDK_DISABLED=true: the receiver got %d requests, want 0", n)
	}
	if def != nil {
		if n := def.requests.Load(); n != 0 {
			t.Errorf("no endpoint set: the default address got %d requests, want 0", n)
		}
	}
}
