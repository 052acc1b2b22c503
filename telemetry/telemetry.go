// Package telemetry is lakegate's OpenTelemetry tracing: Setup builds the
// process's trace pipeline from the standard OTEL_* environment variables
// (the SDK's batch span processor and an OTLP/HTTP exporter of our own,
// otlp.go) and installs it as OpenTelemetry's global tracer provider,
// which the other packages' spans go to; with no OTLP endpoint configured
// it installs nothing, and Start costs a branch. It also holds the helpers
// every layer uses the same way: span start and failure, the carrier of
// MCP's _meta, and the slog handler that adds trace and span ids to log
// lines.
//
// It imports the kernel (package lakegate), OpenTelemetry's API and SDK and
// protobuf's wire encoding only: never server, mcp, query, blocktransport
// or config.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lakegate/lakegate"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES do not set one.
const DefaultServiceName = "lakegate"

// Options tune Setup. The zero value of each field is its default.
type Options struct {
	// Version is the service.version resource attribute.
	Version string
	// Logger receives the SDK's errors (a failed export); nil discards.
	Logger *slog.Logger
}

// Tracing is the process's trace pipeline, built by Setup. Whoever called
// Setup owns it and closes it at exit, after the server has stopped, so
// that the last spans are flushed. Its methods are safe for concurrent use.
type Tracing struct {
	tp        *sdktrace.TracerProvider // nil: tracing is off
	closeOnce sync.Once
	closeErr  error
}

// Setup reads the standard OpenTelemetry environment through getenv and,
// when traces are to be exported, builds the pipeline and installs it as
// the global tracer provider, with W3C tracecontext and baggage as the
// global propagator. Traces are exported when OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, unless OTEL_SDK_DISABLED is
// true or OTEL_TRACES_EXPORTER is none. Otherwise Setup changes nothing:
// OpenTelemetry's global stays the no-op, and Tracing.Enabled is false.
//
// The exporter speaks OTLP over HTTP with protobuf, the specification's
// default protocol (grpc and http/json are refused with a clear error),
// and reads OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, _TIMEOUT, _COMPRESSION,
// _CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY through getenv. The
// SDK reads the others from the process's environment:
// OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES and the span limits.
//
// Setup never returns a nil *Tracing: when it fails, or tracing is off,
// Close does nothing.
func Setup(ctx context.Context, getenv func(string) string, opts *Options) (*Tracing, error) {
	t := &Tracing{}
	var o Options
	if opts != nil {
		o = *opts
	}
	protocol, err := wanted(getenv)
	if err != nil || protocol == "" {
		return t, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	exp, err := newExporter(getenv)
	if err != nil {
		return t, fmt.Errorf("opentelemetry: OTLP exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", DefaultServiceName)}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	// Later options win: the environment's service name over the default.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithHost(), resource.WithFromEnv())
	if err != nil && res == nil {
		_ = exp.Shutdown(ctx)
		return t, fmt.Errorf("opentelemetry: resource: %w", err)
	}
	if err != nil {
		log.Warn("opentelemetry: resource partly detected", lakegate.LogError, err.Error())
	}
	// The sampler (OTEL_TRACES_SAMPLER, default parent-based always-on)
	// and the batch processor's settings (OTEL_BSP_*) come from the
	// environment when not given here.
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("opentelemetry", lakegate.LogError, err.Error())
	}))
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetTracerProvider(t.tp)
	log.Info("exporting traces", "protocol", protocol, "endpoint", endpoint(getenv))
	return t, nil
}

// endpoint is the traces endpoint as configured, for the log: without
// user information, query or fragment, which may hold credentials.
func endpoint(getenv func(string) string) string {
	e := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	if e == "" {
		e = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" {
		return "(not a URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// wanted returns the OTLP protocol to export traces with, http/protobuf,
// when the environment asks for traces to be exported; else "".
// It refuses the settings lakegate cannot honour.
func wanted(getenv func(string) string) (string, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return "", nil
	}
	if env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return "", nil
	}
	switch exporter := strings.ToLower(env("OTEL_TRACES_EXPORTER")); exporter {
	case "", "otlp":
	case "none":
		return "", nil
	default:
		return "", fmt.Errorf("opentelemetry: OTEL_TRACES_EXPORTER=%s is not supported: lakegate exports traces with otlp (or none)", exporter)
	}
	protocol := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if protocol != "" && protocol != "http/protobuf" {
		return "", fmt.Errorf("opentelemetry: OTLP protocol %q is not supported: lakegate exports OTLP over HTTP "+
			"(set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf or leave it unset; collectors take it on port 4318)", protocol)
	}
	return "http/protobuf", nil
}

// Enabled reports whether this Tracing exports spans.
func (t *Tracing) Enabled() bool { return t.tp != nil }

// Close flushes the spans not yet exported and stops the pipeline, waiting
// at most until ctx ends; then OpenTelemetry's global is a no-op again. It
// is idempotent: a later call returns the first one's result.
func (t *Tracing) Close(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	t.closeOnce.Do(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		if err := t.tp.Shutdown(ctx); err != nil {
			t.closeErr = fmt.Errorf("opentelemetry: flush spans: %w", err)
		}
	})
	return t.closeErr
}
