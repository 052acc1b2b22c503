package query

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
)

func TestTransient(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"serialization failure", context.Background(), &pgconn.PgError{Code: "40001"}, true},
		{"deadlock", context.Background(), &pgconn.PgError{Code: "40P01"}, true},
		{"too many connections", context.Background(), &pgconn.PgError{Code: "53300"}, true},
		{"admin shutdown", context.Background(), &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", context.Background(), &pgconn.PgError{Code: "57P02"}, true},
		{"cannot connect now", context.Background(), &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure", context.Background(), &pgconn.PgError{Code: "08006"}, true},
		{"unexpected EOF", context.Background(), fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"refused", context.Background(), &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"syntax error", context.Background(), &pgconn.PgError{Code: "42601"}, false},
		{"statement timeout", context.Background(), &pgconn.PgError{Code: "57014"}, false},
		{"read only", context.Background(), &pgconn.PgError{Code: "25006"}, false},
		{"context done", cancelled, io.ErrUnexpectedEOF, false},
		{"deadline", context.Background(), context.DeadlineExceeded, false},
		{"sink failed", context.Background(), &sinkErr{io.ErrUnexpectedEOF}, false},
		{"sink failed, wrapped", context.Background(), fmt.Errorf("run: %w", &sinkErr{&net.OpError{Op: "write", Err: errors.New("broken pipe")}}), false},
		{"row over the row bound", context.Background(), &pgproto3.ExceededMaxBodyLenErr{MaxExpectedBodyLen: 1 << 20, ActualBodyLen: 2 << 20}, false},
		{"nil", context.Background(), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := transient(tt.ctx, tt.err); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBreaker(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newBreaker(3, 10*time.Second)
	b.now = func() time.Time { return now }
	cause := &lakegate.Error{Kind: lakegate.KindUnavailable, Message: `database "pg" is unavailable: connection refused by 127.0.0.1:1`, Hint: "check it"}
	steps := []struct {
		name      string
		advance   time.Duration
		outcome   outcome
		wantOK    bool
		wantProbe bool
		want      transition
	}{
		{"closed", 0, outcomeFailure, true, false, breakerSteady},
		{"second failure", 0, outcomeFailure, true, false, breakerSteady},
		{"success resets", 0, outcomeSuccess, true, false, breakerSteady},
		{"one", 0, outcomeFailure, true, false, breakerSteady},
		{"two", 0, outcomeFailure, true, false, breakerSteady},
		{"three opens", 0, outcomeFailure, true, false, breakerOpened},
		{"open", time.Second, outcomeFailure, false, false, breakerSteady},
		{"still open", 8 * time.Second, outcomeFailure, false, false, breakerSteady},
		{"probe fails", 2 * time.Second, outcomeFailure, true, true, breakerSteady},
		{"open again", time.Second, outcomeFailure, false, false, breakerSteady},
		{"neutral probe", 10 * time.Second, outcomeNeutral, true, true, breakerSteady},
		{"probe succeeds", 0, outcomeSuccess, true, true, breakerClosed},
		{"closed again", 0, outcomeSuccess, true, false, breakerSteady},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			now = now.Add(s.advance)
			probe, refused := b.allow("pg")
			if ok := refused == nil; ok != s.wantOK || probe != s.wantProbe {
				t.Fatalf("got ok %v probe %v, want %v %v", ok, probe, s.wantOK, s.wantProbe)
			}
			if refused != nil {
				var le *lakegate.Error
				if !errors.As(refused, &le) || le.RetryAfter <= 0 || le.RetryAfter > 10*time.Second {
					t.Fatalf("got refusal %v, want one with the time left open", le)
				}
				if !strings.Contains(le.Message, "connection refused by 127.0.0.1:1") || le.Hint != cause.Hint {
					t.Errorf("got %q (hint %q), want the last failure's cause and hint", le.Message, le.Hint)
				}
				return
			}
			if got := b.record(probe, s.outcome, cause); got != s.want {
				t.Errorf("got transition %v, want %v", got, s.want)
			}
		})
	}
	t.Run("one probe at a time", func(t *testing.T) {
		b := newBreaker(1, time.Second)
		b.now = func() time.Time { return now }
		b.record(false, outcomeFailure, cause)
		now = now.Add(2 * time.Second)
		if probe, refused := b.allow("pg"); refused != nil || !probe {
			t.Fatalf("got refusal %v probe %v, want the probe", refused, probe)
		}
		if _, refused := b.allow("pg"); refused == nil || b.refusal("pg") == nil {
			t.Errorf("got no refusal while the probe is out")
		}
	})
}

// TestRetryAfterTerminate: the backend running a query is terminated
// from an admin connection (57P01); the query is run again on another
// connection and succeeds.
func TestRetryAfterTerminate(t *testing.T) {
	e := pgEngine(t, nil)
	admin, err := pgx.Connect(t.Context(), os.Getenv(pgEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	const marker = "lakegate_retry_probe"
	sql := "SELECT count(*) AS " + marker + " FROM generate_series(1, 20000000)"
	var terminated atomic.Bool
	stop := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			var ok bool
			err := admin.QueryRow(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid() LIMIT 1`, marker).Scan(&ok)
			if err == nil && ok {
				terminated.Store(true)
				return
			}
		}
	}()
	_, rows, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: sql})
	close(stop)
	<-watcherDone
	if !terminated.Load() {
		t.Skip("the query finished before it could be terminated")
	}
	if err != nil {
		t.Fatalf("got %v, want the query retried after its backend was terminated", err)
	}
	if got := fmt.Sprint(rows[0][0]); got != "20000000" {
		t.Errorf("got %s, want 20000000", got)
	}
	t.Run("no retry when off", func(t *testing.T) {
		e1 := pgEngine(t, &Options{RetryAttempts: 1})
		done := make(chan struct{})
		go func() {
			defer close(done)
			testutil.Within(2*time.Second, func() bool {
				var ok bool
				return admin.QueryRow(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid() LIMIT 1`, marker).Scan(&ok) == nil && ok
			})
		}()
		_, _, err := runSQL(t.Context(), e1, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: sql})
		<-done
		wantKind(t, err, lakegate.KindUnavailable)
	})
}

// TestBreakerOpensOnDeadDatabase: a database whose server went away
// (a closed port) fails transiently; after BreakerFailures the circuit
// opens and calls are refused at once with RetryAfter.
func TestBreakerOpensOnDeadDatabase(t *testing.T) {
	url := os.Getenv(pgEnv)
	if url == "" {
		t.Skip("PostgreSQL tests skipped: " + pgEnv + " not set")
	}
	// A proxy we can close stands for the server.
	deadURL, p := behindProxy(t, pgAppURL)
	p.Start(t)
	e, err := Open(t.Context(), []config.Database{{Name: "pg", URL: deadURL}}, &Options{BreakerFailures: 3, BreakerCooldown: time.Minute, QueryRole: pgtest.QueryRole})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close(context.Background()) }()
	p.Stop()
	e.sources["pg"].(*pgSource).pool.Reset() // drop the live connections: the server is gone

	start := time.Now()
	_, _, err = runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT 1"})
	wantKind(t, err, lakegate.KindUnavailable)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("got %v for three attempts, want bounded backoff", d)
	}
	start = time.Now()
	_, _, err = runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT 1"})
	qe := wantKind(t, err, lakegate.KindUnavailable)
	if qe.RetryAfter <= 0 || qe.RetryAfter > time.Minute {
		t.Errorf("got RetryAfter %v, want the time left open", qe.RetryAfter)
	}
	if !strings.Contains(qe.Message, "connection refused") || !strings.Contains(qe.Message, "not trying for now") {
		t.Errorf("got %q, want the open circuit named with the last failure's cause", qe.Message)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("got %v, want an open circuit to answer at once", d)
	}
}
