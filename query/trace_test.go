package query

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/telemetry"
)

func TestTraceNormalizeSQL(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"literals", "SELECT * FROM t WHERE a = 'x' AND b = 42 AND c = -1.5e-3", "select * from t where a = ? and b = ? and c = -?"},
		{"doubled quote", "SELECT 'it''s secret' AS s", "select ? as s"},
		{"E string", `SELECT E'a\'b secret' , e'x'`, "select e? , e?"},
		{"plain backslash", `SELECT 'a\' AS x`, "select ? as x"},
		{"dollar", "SELECT $$secret$$, $tag$ se$$cret $tag$ FROM t", "select ?, ? from t"},
		{"positional params", "SELECT * FROM t WHERE id = $1 AND x = $2", "select * from t where id = $? and x = $?"},
		{"quoted identifiers keep case", `SELECT "Id", "a""b" FROM "T"`, `select "Id", "a""b" from "T"`},
		{"comments and space", "SELECT a -- secret\n,\tb /* x /* nested */ secret */ FROM  t", "select a , b from t"},
		{"identifiers with digits", "SELECT t1.c2 FROM t1", "select t1.c2 from t1"},
		{"limit and offset", "SELECT * FROM (\nSELECT 1\n) AS lakegate_q LIMIT 101 OFFSET 200", "select * from ( select ? ) as lakegate_q limit ? offset ?"},
		{"unterminated string hides the rest", "SELECT 'secret FROM t", "select ?"},
		{"unterminated dollar", "SELECT $a$ secret", "select ?"},
		{"cast", "SELECT '1'::int, x::text", "select ?::int, x::text"},
		{"blob and bit", "SELECT X'ff', B'101'", "select x?, b?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := normalizeSQL(tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTraceFingerprint(t *testing.T) {
	a := Fingerprint("SELECT * FROM readings WHERE id = 1 LIMIT 101")
	if b := Fingerprint("select *\nfrom readings where id = 99 -- x\nLIMIT 11"); a != b {
		t.Errorf("same shape: got %s and %s, want equal", a, b)
	}
	if c := Fingerprint("SELECT * FROM devices WHERE id = 1 LIMIT 101"); a == c {
		t.Error("another table: got the same fingerprint")
	}
	if len(a) != 16 || strings.Trim(a, "0123456789abcdef") != "" {
		t.Errorf("got %q, want 16 hex digits", a)
	}
}

// FuzzNormalizeSQL checks that no string literal's content survives
// normalization, whatever it holds.
func FuzzNormalizeSQL(f *testing.F) {
	for _, s := range []string{"secret-value-123", "a''b", `\`, "$$", "*/ --", "\n", "é", "'", "1e5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := "SELECT x FROM t WHERE a = '" + strings.ReplaceAll(s, "'", "''") + "' AND b = 1"
		if got, want := normalizeSQL(q), "select x from t where a = ? and b = ?"; got != want {
			t.Errorf("normalizeSQL(%q) = %q, want %q", q, got, want)
		}
		_ = normalizeSQL(s) // any text: no panic
	})
}

// TestTraceRunSpan runs statements on SQLite with a recording tracer provider:
// one client span per Run, child of the caller's span, with the database,
// the fingerprint, rows and bytes, and nothing of the SQL's values or
// parameters; a failure carries its kind.
func TestTraceRunSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	path := filepath.Join(t.TempDir(), "demo.db")
	if err := CreateDemo(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	e, err := Open(t.Context(), []config.Database{{Name: "demo", URL: "sqlite:" + path}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close(context.Background()) }()

	ctx, parent := otel.Tracer("test").Start(t.Context(), "parent")
	sql := "SELECT id, note FROM readings WHERE status <> 'secret-literal-456' AND device_id <> ? ORDER BY id"
	res, _, err := runSQL(ctx, e, lakegate.Caller{}, SQLRequest{Database: "demo", SQL: sql, Params: []any{"secret-value-123"}, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	_, _, bad := runSQL(ctx, e, lakegate.Caller{}, SQLRequest{Database: "demo", SQL: "SELECT nope FROM readings"})
	parent.End()
	if bad == nil {
		t.Fatal("a missing column: got no error")
	}
	var spans []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "SELECT demo" {
			spans = append(spans, s)
		}
	}
	if len(spans) != 2 {
		t.Fatalf("got %d SELECT spans, want 2", len(spans))
	}
	ok, failed := spans[0], spans[1]
	if ok.Parent().SpanID() != parent.SpanContext().SpanID() || ok.SpanKind() != trace.SpanKindClient {
		t.Errorf("got parent %v kind %v, want the caller's span and client", ok.Parent().SpanID(), ok.SpanKind())
	}
	attrs := map[string]string{}
	for _, kv := range ok.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
		for _, secret := range []string{"secret-value-123", "secret-literal-456", "readings"} {
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("attribute %s = %q holds %q", kv.Key, kv.Value.String(), secret)
			}
		}
	}
	want := map[string]string{
		string(telemetry.DBSystem): "sqlite", string(telemetry.DBName): "demo",
		string(telemetry.DBRows): "5", string(telemetry.DBTrunc): "true",
	}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("got %s = %q, want %q", k, attrs[k], v)
		}
	}
	if res.RowCount != 5 || attrs[string(telemetry.DBBytes)] == "" || attrs[string(telemetry.DBBytes)] == "0" {
		t.Errorf("got %d rows, bytes %q, want 5 rows and their bytes", res.RowCount, attrs[string(telemetry.DBBytes)])
	}
	if fp := attrs[string(telemetry.DBQueryFP)]; len(fp) != 16 {
		t.Errorf("got fingerprint %q, want 16 hex digits", fp)
	}
	if failed.Status().Code != codes.Error || failed.Status().Description != "validation_error" {
		t.Errorf("failed statement: got status %v %q, want Error validation_error", failed.Status().Code, failed.Status().Description)
	}
}
