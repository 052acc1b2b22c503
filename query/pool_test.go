package query

import (
	"testing"
	"time"

	"github.com/lakegate/lakegate"
)

// holdSink keeps its statement's connection busy: it blocks in its first
// Row until release is closed.
type holdSink struct {
	started chan struct{}
	release chan struct{}
}

func (h *holdSink) Begin([]ResultColumn) error { return nil }
func (h *holdSink) Row([]Cell) error {
	select {
	case <-h.started:
	default:
		close(h.started)
	}
	<-h.release
	return nil
}
func (h *holdSink) End(*Result) error { return nil }

// TestPoolWaitBounded: with every connection of the pool held, a query
// waits at most AcquireWait and is unavailable with a retry_after, not
// stuck until its statement timeout; once a connection is free it runs,
// and none is left behind.
func TestPoolWaitBounded(t *testing.T) {
	const wait = 300 * time.Millisecond
	e := pgEngine(t, &Options{PoolSize: 1, AcquireWait: wait})
	hold := &holdSink{started: make(chan struct{}), release: make(chan struct{})}
	held, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT id FROM devices"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := held.Run(t.Context(), hold)
		done <- err
	}()
	select {
	case <-hold.started:
	case err := <-done:
		t.Fatalf("the holding query ended early: %v", err)
	}

	start := time.Now()
	_, _, err = runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT 1"})
	qe := wantKind(t, err, lakegate.KindUnavailable)
	if qe.RetryAfter <= 0 {
		t.Errorf("got retry_after %v, want one", qe.RetryAfter)
	}
	if d := time.Since(start); d < wait || d > 10*wait {
		t.Errorf("waited %v for a connection, want about %v", d, wait)
	}

	close(hold.release)
	if err := <-done; err != nil {
		t.Fatalf("the holding query: %v", err)
	}
	for range 3 { // the connection came back to the pool, every time
		if _, _, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT 1"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range e.PoolStats() {
		if st.Acquired != 0 || st.Max != 1 {
			t.Errorf("pool: %d connections still acquired of %d, want 0 of 1", st.Acquired, st.Max)
		}
	}
}
