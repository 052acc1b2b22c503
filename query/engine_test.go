package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
)

func TestOpenErrors(t *testing.T) {
	demo := filepath.Join(t.TempDir(), "demo.db")
	if err := CreateDemo(t.Context(), demo); err != nil {
		t.Fatal(err)
	}
	notDB := filepath.Join(t.TempDir(), "not.db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dbs     []config.Database
		want    lakegate.Kind
		wantMsg string
	}{
		{"none", nil, lakegate.KindValidation, "no database"},
		{"no name", []config.Database{{URL: "sqlite:" + demo}}, lakegate.KindValidation, "no name"},
		{"twice", []config.Database{{Name: "a", URL: "sqlite:" + demo}, {Name: "a", URL: "sqlite:" + demo}}, lakegate.KindValidation, `"a" is configured twice`},
		{"missing sqlite file", []config.Database{{Name: "a", URL: "sqlite:" + demo}, {Name: "m", URL: "sqlite:/nonexistent/x.db"}}, lakegate.KindUnavailable, `database "m"`},
		{"not a database", []config.Database{{Name: "bad", URL: "sqlite:" + notDB}}, lakegate.KindUnavailable, `database "bad"`},
		{"bad postgres url", []config.Database{{Name: "p", URL: "postgres://u:secretpw@host:notaport/db"}}, lakegate.KindValidation, `database "p": invalid PostgreSQL URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Open(t.Context(), tt.dbs, nil)
			if e != nil {
				_ = e.Close(context.Background())
				t.Fatal("got an engine, want none")
			}
			qe := wantKind(t, err, tt.want)
			if !strings.Contains(qe.Message, tt.wantMsg) {
				t.Errorf("got %q, want it to contain %q", qe.Message, tt.wantMsg)
			}
			if strings.Contains(qe.Error(), "secretpw") {
				t.Errorf("got %q, want no password", qe.Error())
			}
		})
	}
}

func TestEngineLifecycle(t *testing.T) {
	dir := t.TempDir()
	var dbs []config.Database
	for _, n := range []string{"zeta", "alpha"} {
		p := filepath.Join(dir, n+".db")
		if err := CreateDemo(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, config.Database{Name: n, URL: "sqlite:" + p})
	}
	want := []Database{{"alpha", SQLite}, {"zeta", SQLite}}
	if url := os.Getenv(pgEnv); url != "" {
		dbs = append(dbs, config.Database{Name: "pg", URL: pgAppURL})
		want = []Database{{"alpha", SQLite}, {"pg", Postgres}, {"zeta", SQLite}}
	}
	var logs strings.Builder
	e, err := Open(t.Context(), dbs, &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), QueryRole: pgtest.QueryRole})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Databases(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if err := e.Ping(t.Context()); err != nil {
		t.Errorf("Ping: got %v, want nil", err)
	}
	if !strings.Contains(logs.String(), "database=alpha") {
		t.Errorf("got logs %q, want the opened databases", logs.String())
	}
	if err := e.Close(t.Context()); err != nil {
		t.Errorf("Close: got %v, want nil", err)
	}
	if err := e.Close(t.Context()); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	err = e.Ping(t.Context())
	if err == nil {
		t.Fatal("Ping after Close: got nil, want an error")
	}
	if k := lakegate.KindOf(err); k != lakegate.KindUnavailable {
		t.Errorf("Ping after Close: got %v, want unavailable", err)
	}
}

// closingSource records when it is closed; its close waits for release
// and returns err.
type closingSource struct {
	source
	name    string
	closed  *[]string
	release chan struct{}
	err     error
}

func (s *closingSource) close() error {
	<-s.release
	*s.closed = append(*s.closed, s.name)
	return s.err
}

func TestEngineClose(t *testing.T) {
	var closed []string
	release := make(chan struct{})
	boom := errors.New("boom")
	e := &Engine{opened: []source{
		&closingSource{name: "first", closed: &closed, release: release},
		&closingSource{name: "second", closed: &closed, release: release, err: boom},
	}}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := e.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close while the sources close, ctx done: got %v, want context.Canceled", err)
	}
	close(release)
	for range 2 {
		if err := e.Close(t.Context()); !errors.Is(err, boom) {
			t.Errorf("Close once released: got %v, want the sources' error", err)
		}
	}
	if want := []string{"second", "first"}; !reflect.DeepEqual(closed, want) {
		t.Errorf("closed %v, want %v (the reverse of opening)", closed, want)
	}
}

func TestOptionsDefaults(t *testing.T) {
	e, _ := sqliteEngine(t, &Options{DefaultLimit: 500, MaxLimit: 50})
	if e.opts.StatementTimeout != DefaultStatementTimeout || e.opts.DefaultLimit != 50 || e.opts.MaxLimit != 50 {
		t.Errorf("got %+v, want timeout 30s and limits capped at 50", e.opts)
	}
	tests := []struct {
		asked, want int
		ok          bool
	}{
		{0, 50, true}, {1, 1, true}, {50, 50, true}, {51, 0, false}, {NoLimit, 50, true}, {-2, 0, false},
	}
	for _, tt := range tests {
		got, err := e.limit(tt.asked)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("limit(%d): got %d %v, want %d ok=%v", tt.asked, got, err, tt.want, tt.ok)
		}
		if err != nil {
			wantKind(t, err, lakegate.KindValidation)
		}
	}
	d, _ := sqliteEngine(t, nil)
	if d.opts.DefaultLimit != DefaultLimit || d.opts.MaxLimit != DefaultMaxLimit || d.opts.MaxRowBytes != DefaultMaxRowBytes ||
		DefaultMaxLimit != 10_000_000 || DefaultMaxRowBytes != 16<<20 {
		t.Errorf("got limits %d/%d, row bytes %d, want %d/10000000 and 16 MiB", d.opts.DefaultLimit, d.opts.MaxLimit, d.opts.MaxRowBytes, DefaultLimit)
	}
}

func TestCatalogCache(t *testing.T) {
	e, path := sqliteEngine(t, nil)
	if _, err := e.Tables(t.Context(), lakegate.Caller{}, "lite"); err != nil {
		t.Fatal(err)
	}
	execSQLite(t, path, "CREATE TABLE later (x INTEGER)")
	if _, err := e.Describe(t.Context(), lakegate.Caller{}, "lite", "later"); lakegate.KindOf(err) != lakegate.KindNotFound {
		t.Errorf("within the TTL: got %v, want not_found from the cached catalog", err)
	}
	cc := e.catalogs["lite"]
	cc.mu.Lock()
	cc.cur.loaded = time.Now().Add(-catalogTTL - time.Second)
	cc.mu.Unlock()
	if _, err := e.Describe(t.Context(), lakegate.Caller{}, "lite", "later"); err != nil {
		t.Errorf("after the TTL: got %v, want the new table", err)
	}
}

func TestClassify(t *testing.T) {
	live := context.Background()
	canceled, cancel := context.WithCancel(live)
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want lakegate.Kind
	}{
		{"query error kept", live, lakegate.Errorf(lakegate.KindForbidden, "x"), lakegate.KindForbidden},
		{"canceled", canceled, errors.New("x"), lakegate.KindUnavailable},
		{"deadline", live, context.DeadlineExceeded, lakegate.KindTimeout},
		{"eof", live, errors.New("x"), lakegate.KindInternal},
		{"params", live, &queryErr{errors.New("expected 1 arguments, got 0")}, lakegate.KindValidation},
		{"row over the bound", live, fmt.Errorf("read: %w", &pgproto3.ExceededMaxBodyLenErr{MaxExpectedBodyLen: 1 << 20, ActualBodyLen: 2 << 20}), lakegate.KindValidation},
		{"sink error is the sink's", live, &sinkErr{errSink}, lakegate.KindInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lakegate.KindOf(classify(tt.ctx, "db", tt.err)); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			var se *sinkErr
			if errors.As(tt.err, &se) {
				if got := classify(tt.ctx, "db", tt.err); got != se.err {
					t.Errorf("got %v, want the sink's own error as it was", got)
				}
			}
		})
	}
}
