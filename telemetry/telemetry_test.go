package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestTraceEnv(t *testing.T) {
	const ep = "OTEL_EXPORTER_OTLP_ENDPOINT"
	const hp = "http/protobuf"
	tests := []struct {
		name    string
		env     func(string) string
		want    string
		wantErr string
	}{
		{"nothing set", envOf(), "", ""},
		{"endpoint", envOf(ep, "http://127.0.0.1:4318"), hp, ""},
		{"traces endpoint", envOf("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"), hp, ""},
		{"blank endpoint", envOf(ep, "  "), "", ""},
		{"sdk disabled", envOf(ep, "http://x:4318", "OTEL_SDK_DISABLED", "TRUE"), "", ""},
		{"sdk disabled false", envOf(ep, "http://x:4318", "OTEL_SDK_DISABLED", "false"), hp, ""},
		{"exporter none", envOf(ep, "http://x:4318", "OTEL_TRACES_EXPORTER", "none"), "", ""},
		{"exporter otlp", envOf(ep, "http://x:4318", "OTEL_TRACES_EXPORTER", "otlp"), hp, ""},
		{"exporter console", envOf(ep, "http://x:4318", "OTEL_TRACES_EXPORTER", "console"), "", "OTEL_TRACES_EXPORTER=console"},
		{"http/protobuf", envOf(ep, "http://x:4318", "OTEL_EXPORTER_OTLP_PROTOCOL", hp), hp, ""},
		{"grpc", envOf(ep, "http://x:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), "", `"grpc" is not supported`},
		{"traces protocol wins", envOf(ep, "http://x:4318", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", hp), hp, ""},
		{"http/json", envOf(ep, "http://x:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"), "", `"http/json" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wanted(tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %v, %v, want %v, nil", got, err, tt.want)
			}
		})
	}
}

func TestTraceSetupOff(t *testing.T) {
	before := otel.GetTracerProvider()
	tr, err := Setup(t.Context(), envOf(), nil)
	if err != nil || tr == nil {
		t.Fatalf("got %v, %v, want a Tracing, nil", tr, err)
	}
	if tr.Enabled() || Enabled() {
		t.Error("tracing on with no endpoint set")
	}
	if otel.GetTracerProvider() != before {
		t.Error("Setup changed the global tracer provider with tracing off")
	}
	ctx, span := Start(t.Context(), "x", trace.SpanKindInternal)
	if span.IsRecording() || ctx != t.Context() {
		t.Error("Start with tracing off: got a recording span or a new context")
	}
	if err := tr.Close(t.Context()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		_, s := Start(context.Background(), "x", trace.SpanKindInternal)
		s.End()
	}); allocs != 0 {
		t.Errorf("Start with tracing off: %v allocations, want 0", allocs)
	}
}

// TestTraceSetupExports runs the pipeline Setup builds against a loopback
// OTLP receiver: the span arrives, with the default service name, and
// Close flushes it.
func TestTraceSetupExports(t *testing.T) {
	var mu sync.Mutex
	var got []*collectortrace.ExportTraceServiceRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	endpoint := srv.URL
	// The SDK reads the resource's variables from the process's environment.
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	var logs bytes.Buffer
	tr, err := Setup(t.Context(), envOf("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint), &Options{Version: "v9", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() || !Enabled() {
		t.Fatal("tracing off with an endpoint set")
	}
	if want := "protocol=http/protobuf endpoint=" + endpoint; !strings.Contains(logs.String(), want) {
		t.Errorf("got log %q, want it to say %q", logs.String(), want)
	}
	_, span := Start(t.Context(), "work", trace.SpanKindInternal)
	Fail(span, &lakegate.Error{Kind: lakegate.KindTimeout, Message: "secret-value-123 took too long"})
	span.End()
	if err := tr.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if Enabled() {
		t.Error("tracing still on after Close")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 {
		t.Fatal("the receiver got no export")
	}
	rs := got[0].ResourceSpans[0]
	attrs := map[string]string{}
	for _, kv := range rs.Resource.Attributes {
		attrs[kv.Key] = kv.Value.GetStringValue()
	}
	if attrs["service.name"] != DefaultServiceName || attrs["service.version"] != "v9" {
		t.Errorf("got resource %v, want service.name %s and service.version v9", attrs, DefaultServiceName)
	}
	s := rs.ScopeSpans[0].Spans[0]
	if s.Name != "work" || rs.ScopeSpans[0].Scope.Name != Scope {
		t.Errorf("got span %q in scope %q, want work in %s", s.Name, rs.ScopeSpans[0].Scope.Name, Scope)
	}
	if b, _ := json.Marshal(got[0]); bytes.Contains(b, []byte("secret-value-123")) {
		t.Error("the error's message was exported")
	}
}

// recorder installs a recording SDK provider as the global for the test.
func recorder(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		otel.SetTextMapPropagator(prevProp)
		_ = tp.Shutdown(context.Background())
	})
	return rec
}

func TestTraceFail(t *testing.T) {
	rec := recorder(t)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"kind", &lakegate.Error{Kind: lakegate.KindValidation, Message: "no such column secret-value-123"}, "validation_error"},
		{"wrapped deadline", errors.Join(errors.New("x"), context.DeadlineExceeded), "timeout"},
		{"other", errors.New("secret-value-123"), "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, span := Start(t.Context(), tt.name, trace.SpanKindInternal)
			Fail(span, tt.err)
			span.End()
			ended := rec.Ended()
			s := ended[len(ended)-1]
			if s.Status().Code != codes.Error || s.Status().Description != tt.want {
				t.Errorf("got status %v %q, want Error %q", s.Status().Code, s.Status().Description, tt.want)
			}
			for _, kv := range s.Attributes() {
				if kv.Key == ErrorType && kv.Value.AsString() != tt.want {
					t.Errorf("got error.type %q, want %q", kv.Value.AsString(), tt.want)
				}
				if strings.Contains(kv.Value.String(), "secret") {
					t.Errorf("attribute %s holds the error's message", kv.Key)
				}
			}
			if len(s.Events()) != 0 {
				t.Errorf("got %d events, want none (no recorded error message)", len(s.Events()))
			}
		})
	}
	_, span := Start(t.Context(), "ok", trace.SpanKindInternal)
	Fail(span, nil)
	span.End()
	if s := rec.Ended()[len(rec.Ended())-1]; s.Status().Code != codes.Unset {
		t.Errorf("Fail(nil): got status %v, want unset", s.Status().Code)
	}
}

func TestTraceMetaCarrier(t *testing.T) {
	recorder(t)
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tests := []struct {
		name  string
		meta  map[string]any
		valid bool
	}{
		{"traceparent", map[string]any{"traceparent": parent, "progressToken": 1}, true},
		{"not a string", map[string]any{"traceparent": 42}, false},
		{"malformed", map[string]any{"traceparent": "00-xyz"}, false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := trace.SpanContextFromContext(Extract(t.Context(), MetaCarrier(tt.meta)))
			if sc.IsValid() != tt.valid {
				t.Fatalf("got valid %v, want %v", sc.IsValid(), tt.valid)
			}
			if tt.valid && (sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || !sc.IsRemote()) {
				t.Errorf("got %v, want the remote parent of %s", sc, parent)
			}
		})
	}
	// Inject then Extract round-trips through a _meta object.
	ctx, span := Start(t.Context(), "x", trace.SpanKindInternal)
	defer span.End()
	m := MetaCarrier{}
	Inject(ctx, m)
	if got := trace.SpanContextFromContext(Extract(t.Context(), m)); got.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("round trip: got %v, want span %v", got.SpanID(), span.SpanContext().SpanID())
	}
	if keys := m.Keys(); len(keys) != 1 || keys[0] != "traceparent" {
		t.Errorf("got keys %v, want [traceparent]", keys)
	}
}

func TestTraceLogHandler(t *testing.T) {
	recorder(t)
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("a", 1)
	ctx, span := Start(t.Context(), "x", trace.SpanKindInternal)
	defer span.End()
	log.InfoContext(ctx, "with span", "b", 2)
	log.Info("without")
	log.WithGroup("g").InfoContext(t.Context(), "no span either")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3: %s", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(lines[1]), &second)
	if first[lakegate.LogTraceID] != span.SpanContext().TraceID().String() || first[lakegate.LogSpanID] != span.SpanContext().SpanID().String() {
		t.Errorf("got %v, want the span's trace and span ids", first)
	}
	if first["a"] != 1.0 || first["b"] != 2.0 {
		t.Errorf("got %v, want the line's own attributes kept", first)
	}
	if _, ok := second[lakegate.LogTraceID]; ok {
		t.Errorf("got %v, want no trace id on a line without a span", second)
	}
}
