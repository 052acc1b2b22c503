package telemetry

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// capture is an OTLP/HTTP receiver keeping each request's decoded body
// and headers, answering with status (200 when zero) until told otherwise.
type capture struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []*collectortrace.ExportTraceServiceRequest
	header []http.Header
	status []int // answers, in order; then 200
	calls  atomic.Int64
}

func newCapture(t *testing.T, status ...int) *capture {
	c := &capture{status: status}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(c.calls.Add(1)) - 1
		if n < len(c.status) {
			w.WriteHeader(c.status[n])
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, _ := io.ReadAll(body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(raw, req); err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.got = append(c.got, req)
		c.header = append(c.header, r.Header.Clone())
		c.mu.Unlock()
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// testSpans are spans with every kind of field the transform fills.
func testSpans() []sdktrace.ReadOnlySpan {
	tid := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	ts, _ := trace.ParseTraceState("vendor=x")
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{9, 9}, TraceFlags: trace.FlagsSampled, Remote: true})
	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{7}, TraceFlags: trace.FlagsSampled})
	res := resource.NewSchemaless(attribute.String("service.name", "lakegate"), attribute.Int("n", 3))
	start := time.Unix(1700000000, 123456789)
	scope := instrumentation.Scope{Name: Scope, Version: "v1"}
	other := instrumentation.Scope{Name: "other", SchemaURL: "https://opentelemetry.io/schemas/1.26.0",
		Attributes: attribute.NewSet(attribute.Bool("b", true))}
	stubs := tracetest.SpanStubs{
		{
			Name: "POST /rest/sql", SpanKind: trace.SpanKindServer, Parent: parent,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, TraceState: ts}),
			StartTime:   start, EndTime: start.Add(time.Millisecond),
			Attributes: []attribute.KeyValue{
				attribute.String("s", "v"), attribute.String("empty", ""), attribute.Int64("i", -42), attribute.Int("zero", 0),
				attribute.Float64("f", 1.5), attribute.Bool("t", true), attribute.Bool("f0", false),
				attribute.StringSlice("ss", []string{"a", ""}), attribute.Int64Slice("is", []int64{1, -2}),
				attribute.Float64Slice("fs", []float64{0.25}), attribute.BoolSlice("bs", []bool{true, false}),
			},
			Links:             []sdktrace.Link{{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("k", "l")}, DroppedAttributeCount: 1}},
			Events:            []sdktrace.Event{{Name: "e", Time: start.Add(time.Microsecond), Attributes: []attribute.KeyValue{attribute.Int("x", 1)}}},
			Status:            sdktrace.Status{Code: codes.Error, Description: "timeout"},
			DroppedAttributes: 2, DroppedEvents: 3, DroppedLinks: 4,
			Resource: res, InstrumentationScope: scope,
		},
		{
			Name: "SELECT iot", SpanKind: trace.SpanKindClient,
			Parent:      trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}}),
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}),
			StartTime:   start, EndTime: start.Add(2 * time.Millisecond),
			Status:   sdktrace.Status{Code: codes.Ok},
			Resource: res, InstrumentationScope: scope,
		},
		{
			Name: "root", SpanKind: trace.SpanKindInternal,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{3}, SpanID: trace.SpanID{3}}),
			StartTime:   start, EndTime: start,
			Resource: res, InstrumentationScope: other,
		},
	}
	return stubs.Snapshots()
}

// TestTraceExporterMatchesOfficial sends the same spans with the official
// OTLP/HTTP exporter and with lakegate's: the receiver decodes equal
// requests.
func TestTraceExporterMatchesOfficial(t *testing.T) {
	c := newCapture(t)
	ctx := t.Context()
	official, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(c.srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	// Enough spans for a message over 16 KiB: three-byte lengths.
	var spans []sdktrace.ReadOnlySpan
	for range 100 {
		spans = append(spans, testSpans()...)
	}
	if err := official.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	_ = official.Shutdown(ctx)
	ours, err := newExporter(envOf("OTEL_EXPORTER_OTLP_ENDPOINT", c.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if err := ours.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	_ = ours.Shutdown(ctx)
	if len(c.got) != 2 {
		t.Fatalf("got %d requests, want 2", len(c.got))
	}
	if !proto.Equal(c.got[0], c.got[1]) {
		t.Errorf("the requests differ:\nofficial: %v\nlakegate: %v", c.got[0], c.got[1])
	}
	if n := len(c.got[1].ResourceSpans[0].ScopeSpans); n != 2 {
		t.Errorf("got %d scopes, want 2", n)
	}
}

func TestTraceExporterURL(t *testing.T) {
	tests := []struct {
		name    string
		env     func(string) string
		want    string
		wantErr bool
	}{
		{"base", envOf("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), "http://c:4318/v1/traces", false},
		{"base slash", envOf("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"), "http://c:4318/v1/traces", false},
		{"base path", envOf("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c/otlp/"), "https://c/otlp/v1/traces", false},
		{"signal as is", envOf("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://c/custom", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"), "https://c/custom", false},
		{"signal root", envOf("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318"), "http://c:4318/", false},
		{"no scheme", envOf("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4318"), "", true},
		{"grpc scheme", envOf("OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://c:4317"), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tracesURL(tt.env)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("got %q, %v, want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestTraceExporterConfigErrors(t *testing.T) {
	const ep = "OTEL_EXPORTER_OTLP_ENDPOINT"
	tests := []struct {
		name string
		env  func(string) string
		want string
	}{
		{"timeout", envOf(ep, "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT", "soon"), "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{"compression", envOf(ep, "http://c", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "zstd"), "OTEL_EXPORTER_OTLP_COMPRESSION"},
		{"headers", envOf(ep, "http://c", "OTEL_EXPORTER_OTLP_HEADERS", "novalue"), "OTEL_EXPORTER_OTLP_HEADERS"},
		{"certificate", envOf(ep, "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent.pem"), "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{"client key", envOf(ep, "https://c", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/nonexistent.pem"), "CLIENT_CERTIFICATE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := newExporter(tt.env); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// TestTraceExporterSends checks headers (the traces-specific list winning),
// gzip, the retry of a 503 and the refusal of a 400.
func TestTraceExporterSends(t *testing.T) {
	ctx := t.Context()
	c := newCapture(t, http.StatusServiceUnavailable)
	e, err := newExporter(envOf("OTEL_EXPORTER_OTLP_ENDPOINT", c.srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20a, x-team = lake ",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "authorization=Bearer%20b",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip", "OTEL_EXPORTER_OTLP_TIMEOUT", "2000"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(ctx)
	if err := e.ExportSpans(ctx, testSpans()); err != nil {
		t.Fatal(err)
	}
	if n := c.calls.Load(); n != 2 {
		t.Errorf("got %d calls, want 2 (a 503, then the retry)", n)
	}
	if len(c.header) != 1 {
		t.Fatalf("got %d decoded requests, want 1", len(c.header))
	}
	h := c.header[0]
	if h.Get("Authorization") != "Bearer b" || h.Get("X-Team") != "lake" || h.Get("Content-Encoding") != "gzip" {
		t.Errorf("got headers %v, want the traces authorization, x-team and gzip", h)
	}

	refused := newCapture(t, http.StatusBadRequest)
	e2, err := newExporter(envOf("OTEL_EXPORTER_OTLP_ENDPOINT", refused.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Shutdown(ctx)
	if err := e2.ExportSpans(ctx, testSpans()); err == nil || refused.calls.Load() != 1 {
		t.Errorf("a 400: got %v after %d calls, want an error after 1", err, refused.calls.Load())
	}

	down := newCapture(t, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable)
	e3, err := newExporter(envOf("OTEL_EXPORTER_OTLP_ENDPOINT", down.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer e3.Shutdown(ctx)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := e3.ExportSpans(short, testSpans()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a collector down until the deadline: got %v, want the deadline", err)
	}
	_ = e3.Shutdown(ctx)
	if err := e3.ExportSpans(ctx, testSpans()); err != nil || down.calls.Load() != 1 {
		t.Errorf("after Shutdown: got %v after %d calls, want nothing sent", err, down.calls.Load())
	}
}
