package query

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
)

// closedPort is a loopback address nothing listens on: connecting is
// refused.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestOutageAtStart: a PostgreSQL database that refuses connections does
// not stop Open; every way of asking says why, without the password, and
// the outage is logged once while the watcher retries.
func TestOutageAtStart(t *testing.T) {
	addr := closedPort(t)
	var logs testutil.Buffer
	e, err := Open(t.Context(), []config.Database{{Name: "p", URL: "postgres://u:secretpw@" + addr + "/db"}},
		&Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("Open: %v, want an engine serving without the database", err)
	}
	defer func() { _ = e.Close(context.Background()) }()
	want := "connection refused"
	check := func(how string, err error) {
		t.Helper()
		qe := wantKind(t, err, lakegate.KindUnavailable)
		if !strings.Contains(qe.Message, want) || !strings.Contains(qe.Hint, "PostgreSQL runs") || qe.RetryAfter < time.Second {
			t.Errorf("%s: got %q (hint %q, retry after %v), want the cause, what to check and when to retry", how, qe.Message, qe.Hint, qe.RetryAfter)
		}
		if body := lakegate.NewErrorBody(qe); strings.Contains(body.Message+body.Hint, addr) {
			t.Errorf("%s: got %q, want no address shown to callers", how, body.Message)
		}
	}
	check("ping", e.PingEach(t.Context())["p"])
	check("unserved", e.Unserved()["p"])
	_, _, err = runSQL(t.Context(), e, lakegate.Caller{Subject: "s", Roles: []string{lakegate.RoleReader}}, SQLRequest{Database: "p", SQL: "SELECT 1"})
	check("query", err)
	_, err = e.Tables(t.Context(), lakegate.Caller{Subject: "s", Roles: []string{lakegate.RoleAdmin}}, "p")
	check("tables", err)
	// The first retry comes within a second; the log says the cause once.
	testutil.Eventually(t, 10*time.Second, "a retry", func() bool {
		g := e.gates["p"]
		g.mu.Lock()
		defer g.mu.Unlock()
		return time.Since(g.since) > 1500*time.Millisecond
	})
	if n := strings.Count(logs.String(), "database is not served"); n != 1 || !strings.Contains(logs.String(), want) ||
		!strings.Contains(logs.String(), addr) {
		t.Errorf("got log %q, want one line naming the cause and the address", logs.String())
	}
	if strings.Contains(logs.String(), "secretpw") {
		t.Errorf("got log %q, want no password", logs.String())
	}
	if strings.Contains(logs.String(), "still not served") {
		t.Errorf("got log %q, want no new line while the cause is the same", logs.String())
	}
}

func TestOutageCause(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 5432}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name       string
		err        error
		want, hint string
	}{
		{"refused", refused, "connection refused", "listens"},
		{"dns", &net.DNSError{Name: "db.example", Err: "no such host", IsNotFound: true}, "does not resolve (DNS)", "resolver"},
		{"password", &pgconn.PgError{Code: "28P01", Message: `password authentication failed for user "app"`}, "authentication failed", "password"},
		{"recovery", &pgconn.PgError{Code: "57P03", Message: "the database system is in recovery mode"}, "in recovery", "retry later"},
		{"too many", &pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"}, "too many connections", "max_connections"},
		{"timeout", &net.OpError{Op: "dial", Net: "tcp", Addr: refused.Addr, Err: timeoutErrNet{}}, "no answer in time", "firewall"},
		{"lost", errors.New("unexpected EOF"), "the connection was lost", "retry later"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cause, hint := outageCause(tt.err)
			if !strings.Contains(cause, tt.want) || !strings.Contains(hint, tt.hint) {
				t.Errorf("got %q / %q, want %q / %q", cause, hint, tt.want, tt.hint)
			}
			if strings.Contains(cause+hint, "10.0.0.1") || strings.Contains(cause+hint, "app") || strings.Contains(cause+hint, "db.example") {
				t.Errorf("got %q / %q, want no address or name", cause, hint)
			}
		})
	}
}

type timeoutErrNet struct{}

func (timeoutErrNet) Error() string   { return "i/o timeout" }
func (timeoutErrNet) Timeout() bool   { return true }
func (timeoutErrNet) Temporary() bool { return true }

// TestOutageCausesPG: the causes a real server gives, each in /ready's
// words: no such database, too many connections for the role, TLS
// refused.
func TestOutageCausesPG(t *testing.T) {
	if os.Getenv(pgEnv) == "" {
		t.Skip("PostgreSQL tests skipped")
	}
	u, err := url.Parse(pgAppURL)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(u *url.URL)) string {
		c := *u
		f(&c)
		return c.String()
	}
	tests := []struct {
		name, url, want string
	}{
		{"no database", with(func(u *url.URL) { u.Path = "/lakegate_no_such_db" }), "the configured database does not exist"},
		{"too many", with(func(u *url.URL) { u.User = url.User(pgtest.NoLimit) }), "too many connections"},
		{"tls refused", with(func(u *url.URL) { u.RawQuery = "sslmode=require" }), "TLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Open(t.Context(), []config.Database{{Name: "p", URL: tt.url}}, &Options{QueryRole: pgtest.QueryRole})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer func() { _ = e.Close(context.Background()) }()
			qe := wantKind(t, e.PingEach(t.Context())["p"], lakegate.KindUnavailable)
			t.Logf("%s (hint: %s)", qe.Message, qe.Hint)
			if !strings.Contains(qe.Message, tt.want) {
				t.Errorf("got %q, want %q", qe.Message, tt.want)
			}
		})
	}
}

// behindProxy is rawURL with its host replaced by a stopped proxy's
// address, and that proxy.
func behindProxy(t *testing.T, rawURL string) (string, *testutil.Proxy) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.NewProxy(t, u.Host)
	u.Host = p.Addr
	return u.String(), p
}

// TestOutageRecovers: a database down at start is served once it answers,
// without a restart, and the log says when.
func TestOutageRecovers(t *testing.T) {
	if os.Getenv(pgEnv) == "" {
		t.Skip("PostgreSQL tests skipped")
	}
	dsn, p := behindProxy(t, pgAppURL)
	var logs testutil.Buffer
	e, err := Open(t.Context(), []config.Database{{Name: "pg", URL: dsn}},
		&Options{QueryRole: pgtest.QueryRole, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close(context.Background()) }()
	reader := lakegate.Caller{Subject: "s", Roles: []string{lakegate.RoleReader}}
	if _, _, err := runSQL(t.Context(), e, reader, SQLRequest{Database: "pg", SQL: "SELECT 1"}); lakegate.KindOf(err) != lakegate.KindUnavailable {
		t.Fatalf("got %v, want unavailable while the database is down", err)
	}
	p.Start(t)
	testutil.Eventually(t, 10*time.Second, "the database served", func() bool { return e.PingEach(t.Context()) == nil })
	if _, rows := collectSQL(t, e, reader, SQLRequest{Database: "pg", SQL: "SELECT count(*) FROM devices"}); len(rows) != 1 {
		t.Fatalf("got %v, want one row", rows)
	}
	if !strings.Contains(logs.String(), "database answers: serving it") {
		t.Errorf("got log %q, want the end of the outage", logs.String())
	}
}

// TestOutageGuardsLate: a database that comes up after start is checked
// like one up at start: a superuser connection keeps it unserved, with
// the finding as the cause and an ERROR line.
func TestOutageGuardsLate(t *testing.T) {
	admin := os.Getenv(pgEnv)
	if admin == "" {
		t.Skip("PostgreSQL tests skipped")
	}
	dsn, p := behindProxy(t, pgTestURL(admin))
	var logs testutil.Buffer
	e, err := Open(t.Context(), []config.Database{{Name: "pg", URL: dsn}}, &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close(context.Background()) }()
	p.Start(t)
	testutil.Eventually(t, 10*time.Second, "the privilege finding", func() bool {
		return strings.Contains(lakegate.NewErrorBody(e.PingEach(t.Context())["pg"]).Message, "privileged PostgreSQL role")
	})
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("got log %q, want the finding at ERROR", logs.String())
	}
	if _, _, err := runSQL(t.Context(), e, lakegate.Caller{Subject: "s", Roles: []string{lakegate.RoleReader}},
		SQLRequest{Database: "pg", SQL: "SELECT 1"}); err == nil {
		t.Fatal("got a query served as a superuser, want it refused")
	}
}
