package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exporter sends spans to an OTLP/HTTP endpoint as protobuf (POST
// .../v1/traces, application/x-protobuf), configured by the standard
// OTEL_EXPORTER_OTLP_* variables as the specification defines them: the
// endpoint, headers, timeout, gzip compression and the TLS certificate
// files, the traces-specific variable winning over the general one. It
// retries what the specification calls retryable (429, 502, 503, 504 and
// failed connections), honouring Retry-After, until the export's context
// ends. The batch span processor calls it from its own goroutine; it is
// safe for concurrent use.
//
// It stands in for the official otlptracehttp exporter, whose internal
// configuration package and the generated collector package it sends
// both import gRPC (open-telemetry/opentelemetry-go#2579): linked in, that
// code's init-time heap and globals made every garbage collection of a
// small server dearer, about 17% more instructions per run_sql point call
// in make bench, with tracing unset. A test checks that both exporters
// send the same request for the same spans.
type exporter struct {
	url     string
	headers http.Header
	gzip    bool
	timeout time.Duration
	client  *http.Client
	stopped atomic.Bool
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

// defaultTimeout is OTEL_EXPORTER_OTLP_TIMEOUT's default.
const defaultTimeout = 10 * time.Second

// newExporter reads the exporter's settings through getenv.
func newExporter(getenv func(string) string) (*exporter, error) {
	env := func(name string) string {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
			return v
		}
		return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name))
	}
	e := &exporter{headers: http.Header{}, timeout: defaultTimeout}
	var err error
	if e.url, err = tracesURL(getenv); err != nil {
		return nil, err
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if err := parseHeaders(getenv(name), e.headers); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if v := env("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT: %q is not a positive number of milliseconds", v)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch c := env("COMPRESSION"); c {
	case "", "none":
	case "gzip":
		e.gzip = true
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION: %q is not supported: use gzip or none", c)
	}
	tlsConf, err := tlsFiles(env("CERTIFICATE"), env("CLIENT_CERTIFICATE"), env("CLIENT_KEY"))
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConf
	e.client = &http.Client{Transport: tr}
	return e, nil
}

// tracesURL is where traces go: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it
// is (its root when it has no path), else OTEL_EXPORTER_OTLP_ENDPOINT
// with v1/traces appended to its path.
func tracesURL(getenv func(string) string) (string, error) {
	name := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	raw := strings.TrimSpace(getenv(name))
	signal := raw != ""
	if !signal {
		name = "OTEL_EXPORTER_OTLP_ENDPOINT"
		raw = strings.TrimSpace(getenv(name))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: want an http:// or https:// URL", name)
	}
	switch {
	case !signal:
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	case u.Path == "":
		u.Path = "/"
	}
	return u.String(), nil
}

// parseHeaders adds the headers of a W3C-baggage-style list
// ("k1=v1,k2=v2", values percent-encoded) to h, replacing earlier values.
func parseHeaders(list string, h http.Header) error {
	for item := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return errors.New("want key=value pairs separated by commas")
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("the value of %s is not percent-encoded", k)
		}
		h.Set(k, dv)
	}
	return nil
}

// tlsFiles is the TLS configuration the certificate variables ask for, or
// nil (the system's roots).
func tlsFiles(ca, cert, key string) (*tls.Config, error) {
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: %w", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("OTEL_EXPORTER_OTLP_CERTIFICATE: no PEM certificate in the file")
		}
	}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE / _CLIENT_KEY: %w", err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

// ExportSpans sends spans in one request, retrying what may be retried
// until ctx ends.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 || e.stopped.Load() {
		return nil
	}
	body := encodeSpans(nil, spans)
	if e.gzip {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = zb.Bytes()
	}
	wait := retryFirst
	for {
		retry, after, err := e.send(ctx, body)
		if err == nil || !retry {
			return err
		}
		if after <= 0 {
			after, wait = wait, min(2*wait, retryMax)
		}
		t := time.NewTimer(after)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// The backoff between retries: doubling from retryFirst up to retryMax.
const (
	retryFirst = 500 * time.Millisecond
	retryMax   = 5 * time.Second
)

// send makes one request; retry says whether another may succeed, after
// how long if the collector said (Retry-After).
func (e *exporter) send(ctx context.Context, body []byte) (retry bool, after time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("otlp: %w", err)
	}
	for k, v := range e.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "lakegate-otlp-exporter")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		// The error names the URL, which holds no header (no token).
		return true, 0, fmt.Errorf("otlp: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		return false, 0, nil
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			after = min(time.Duration(s)*time.Second, time.Minute)
		}
		return true, after, fmt.Errorf("otlp: the collector answered %s", resp.Status)
	}
	return false, 0, fmt.Errorf("otlp: the collector answered %s (not retried)", resp.Status)
}

// Shutdown stops exporting; later exports send nothing. The batch span
// processor has flushed its spans through ExportSpans before.
func (e *exporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	e.client.CloseIdleConnections()
	return nil
}
