package jobs

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
)

var (
	alice = lakegate.Caller{Subject: "alice", Roles: []string{lakegate.RoleReader}}
	bob   = lakegate.Caller{Subject: "bob", Roles: []string{lakegate.RoleReader}}
	root  = lakegate.Caller{Subject: "root", Roles: []string{lakegate.RoleAdmin}}
)

func newRegistry(t *testing.T, o Options) *Registry {
	t.Helper()
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// A job answers at once, runs apart from its caller, reports progress,
// and ends done with its result; its owner's Wait returns at its end, not
// at the wait's; another subject is told it does not exist, an admin
// sees it.
func TestJobLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, Options{})
		release := make(chan struct{})
		st, err := r.Start(t.Context(), "alice", "run_sql", func(ctx context.Context, watch func(Meter)) (any, error) {
			p := &Progress{}
			watch(p)
			p.Set(10, 100)
			<-release
			p.Set(20, 200)
			return map[string]any{"transfer_id": "t1"}, nil
		})
		if err != nil || st.State != Running || len(st.ID) != 32 {
			t.Fatalf("start: got %+v %v", st, err)
		}
		synctest.Wait()
		if got, _ := r.Get(alice, st.ID); got.State != Running || got.Rows != 10 || got.Bytes != 100 {
			t.Errorf("running: got %+v, want its progress", got)
		}
		if _, err := r.Get(bob, st.ID); lakegate.KindOf(err) != lakegate.KindNotFound {
			t.Errorf("another subject: got %v, want not_found", err)
		}
		if got, err := r.Get(root, st.ID); err != nil || got.Owner != "alice" {
			t.Errorf("an admin: got %+v %v", got, err)
		}
		// A wait of 25 s ends once the job does, 3 s in.
		time.AfterFunc(3*time.Second, func() { close(release) })
		start := time.Now()
		got, err := r.Wait(t.Context(), alice, st.ID, 25*time.Second)
		if err != nil || got.State != Done || got.Rows != 20 || got.Ended == nil || time.Since(start) != 3*time.Second {
			t.Errorf("wait: got %+v %v after %v, want done at 3s", got, err, time.Since(start))
		}
		if res, _ := got.Result.(map[string]any); res["transfer_id"] != "t1" {
			t.Errorf("result: got %v", got.Result)
		}
		if list := r.List(alice); len(list) != 1 || list[0].ID != st.ID || len(r.List(bob)) != 0 || len(r.List(root)) != 1 {
			t.Errorf("lists: alice %v, bob %v, root %v", list, r.List(bob), r.List(root))
		}
	})
}

// A wait with nothing happening returns after its wait, still running.
func TestWaitRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, Options{})
		st, _ := r.Start(t.Context(), "alice", "q", func(ctx context.Context, _ func(Meter)) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		start := time.Now()
		got, err := r.Wait(t.Context(), alice, st.ID, 25*time.Second)
		if err != nil || got.State != Running || time.Since(start) != 25*time.Second {
			t.Errorf("got %+v %v after %v", got, err, time.Since(start))
		}
	})
}

// A run that names its transfer tells the waiters at once (a second
// watch): a wait that began before answers with the transfer, 2 s in, not
// at the job's end; the next wait waits for the end.
func TestWaitWakesOnNews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, Options{})
		st, _ := r.Start(t.Context(), "alice", "run_sql", func(ctx context.Context, watch func(Meter)) (any, error) {
			m := &namedMeter{}
			watch(m)
			time.Sleep(2 * time.Second)
			m.name("t1")
			watch(m)
			time.Sleep(10 * time.Second)
			return "done", nil
		})
		start := time.Now()
		got, err := r.Wait(t.Context(), alice, st.ID, 25*time.Second)
		if err != nil || got.State != Running || got.Transfer != "t1" || time.Since(start) != 2*time.Second {
			t.Errorf("first wait: got %+v %v after %v, want running with t1 at 2s", got, err, time.Since(start))
		}
		got, err = r.Wait(t.Context(), alice, st.ID, 25*time.Second)
		if err != nil || got.State != Done || time.Since(start) != 12*time.Second {
			t.Errorf("second wait: got %+v %v after %v, want done at 12s", got, err, time.Since(start))
		}
	})
}

// News told before a wait began, and not yet in any status shown, answers
// the wait at once: a follower that asks just after the naming still
// learns of it without waiting for the job's end.
func TestWaitTellsEarlierNews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, Options{})
		// The naming comes after Start has answered (else Start's own
		// status tells it), and before the wait.
		started, named := make(chan struct{}), make(chan struct{})
		st, _ := r.Start(t.Context(), "alice", "run_sql", func(ctx context.Context, watch func(Meter)) (any, error) {
			m := &namedMeter{}
			watch(m)
			<-started
			m.name("t1")
			watch(m)
			close(named)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		close(started)
		<-named
		start := time.Now()
		got, err := r.Wait(t.Context(), alice, st.ID, 25*time.Second)
		if err != nil || got.Transfer != "t1" || time.Since(start) != 0 {
			t.Errorf("first wait: got %+v %v after %v, want t1 at once", got, err, time.Since(start))
		}
		got, _ = r.Wait(t.Context(), alice, st.ID, 25*time.Second)
		if got.State != Running || time.Since(start) != 25*time.Second {
			t.Errorf("second wait: got %+v after %v, want the whole wait (the news was told)", got, time.Since(start))
		}
	})
}

// namedMeter is a TransferMeter whose transfer its run names. Like the
// tools' meters it is read by status while the run goes on: atomically.
type namedMeter struct {
	Progress
	id atomic.Pointer[string]
}

func (m *namedMeter) Transfer() string {
	if id := m.id.Load(); id != nil {
		return *id
	}
	return ""
}

func (m *namedMeter) name(id string) { m.id.Store(&id) }

// Cancel stops a running job: its context ends, it is cancelled (not
// failed), and another subject cannot cancel it.
func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, Options{})
		stopped := make(chan error, 1)
		st, _ := r.Start(t.Context(), "alice", "q", func(ctx context.Context, _ func(Meter)) (any, error) {
			<-ctx.Done()
			stopped <- ctx.Err()
			return nil, ctx.Err()
		})
		if _, err := r.Cancel(t.Context(), bob, st.ID); lakegate.KindOf(err) != lakegate.KindNotFound {
			t.Errorf("bob cancels alice's job: got %v", err)
		}
		got, err := r.Cancel(t.Context(), alice, st.ID)
		if err != nil || got.State != Cancelled || got.Error == nil || !strings.Contains(got.Error.Message, "cancelled") {
			t.Errorf("cancel: got %+v %v", got, err)
		}
		if err := <-stopped; !errors.Is(err, context.Canceled) {
			t.Errorf("the run's context: got %v, want cancelled", err)
		}
	})
}

// A job past its timeout fails with a timeout error; a failing run fails
// with its error.
func TestTimeoutAndFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, Options{Timeout: time.Minute})
		st, _ := r.Start(t.Context(), "alice", "q", func(ctx context.Context, _ func(Meter)) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		got, _ := r.Wait(t.Context(), alice, st.ID, time.Hour)
		if got.State != Failed || got.Error == nil || got.Error.Kind != lakegate.KindTimeout || *got.Ended != got.Created.Add(time.Minute) {
			t.Errorf("timeout: got %+v (error %+v)", got, got.Error)
		}
		boom := &lakegate.Error{Kind: lakegate.KindValidation, Message: "no such column"}
		st, _ = r.Start(t.Context(), "alice", "q", func(context.Context, func(Meter)) (any, error) { return nil, boom })
		got, _ = r.Wait(t.Context(), alice, st.ID, time.Hour)
		if got.State != Failed || got.Error == nil || got.Error.Message != "no such column" {
			t.Errorf("failure: got %+v", got)
		}
	})
}

// An ended job keeps its result for Keep, is then expired, and is
// forgotten after as long again.
func TestExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, Options{Keep: 10 * time.Minute})
		st, _ := r.Start(t.Context(), "alice", "q", func(context.Context, func(Meter)) (any, error) { return "rows", nil })
		synctest.Wait()
		time.Sleep(9 * time.Minute)
		if got, _ := r.Get(alice, st.ID); got.State != Done || got.Result != "rows" {
			t.Errorf("at 9 min: got %+v", got)
		}
		time.Sleep(2 * time.Minute)
		if got, _ := r.Get(alice, st.ID); got.State != Expired || got.Result != nil {
			t.Errorf("at 11 min: got %+v, want expired without its result", got)
		}
		time.Sleep(10 * time.Minute)
		if _, err := r.Get(alice, st.ID); lakegate.KindOf(err) != lakegate.KindNotFound {
			t.Errorf("at 21 min: got %v, want forgotten", err)
		}
	})
}

// One subject's running jobs are bounded; another's are not affected.
func TestMaxPerOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, Options{MaxPerOwner: 2})
		block := func(ctx context.Context, _ func(Meter)) (any, error) { <-ctx.Done(); return nil, ctx.Err() }
		for range 2 {
			if _, err := r.Start(t.Context(), "alice", "q", block); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.Start(t.Context(), "alice", "q", block); lakegate.KindOf(err) != lakegate.KindRateLimited {
			t.Errorf("a third: got %v, want rate_limited", err)
		}
		if _, err := r.Start(t.Context(), "bob", "q", block); err != nil {
			t.Errorf("bob's first: got %v", err)
		}
	})
}

// Close cancels the running jobs and waits for them; no job starts after.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := New(Options{})
		var ended sync.WaitGroup
		ended.Add(3)
		for range 3 {
			_, _ = r.Start(t.Context(), "alice", "q", func(ctx context.Context, _ func(Meter)) (any, error) {
				defer ended.Done()
				<-ctx.Done()
				return nil, ctx.Err()
			})
		}
		if err := r.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		ended.Wait()
		if _, err := r.Start(t.Context(), "alice", "q", nil); !errors.Is(err, lakegate.ErrShuttingDown) {
			t.Errorf("after close: got %v", err)
		}
	})
}

func TestIDPrefix(t *testing.T) {
	r := newRegistry(t, Options{IDPrefix: "ab12"})
	st, _ := r.Start(t.Context(), "alice", "q", func(context.Context, func(Meter)) (any, error) { return nil, nil })
	if !strings.HasPrefix(st.ID, "ab12") || len(st.ID) != 32 {
		t.Errorf("got id %q", st.ID)
	}
	if _, err := New(Options{IDPrefix: "XYZ"}); err == nil {
		t.Error("a prefix that is not hex: accepted")
	}
}

// A subject's ended jobs are bounded: past the bound the oldest are
// forgotten; the running ones never are.
func TestEndedJobsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, Options{})
		block := func(ctx context.Context, _ func(Meter)) (any, error) { <-ctx.Done(); return nil, ctx.Err() }
		running, _ := r.Start(t.Context(), "alice", "q", block)
		var first Status
		for i := range maxEndedPerOwner + 10 {
			st, err := r.Start(t.Context(), "alice", "q", func(context.Context, func(Meter)) (any, error) { return "ok", nil })
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = st
			}
			synctest.Wait()
			time.Sleep(time.Millisecond)
		}
		if n := len(r.List(alice)); n != maxEndedPerOwner+1 {
			t.Errorf("got %d jobs kept, want %d ended and the running one", n, maxEndedPerOwner)
		}
		if _, err := r.Get(alice, first.ID); lakegate.KindOf(err) != lakegate.KindNotFound {
			t.Errorf("the oldest ended job: got %v, want forgotten", err)
		}
		if st, err := r.Get(alice, running.ID); err != nil || st.State != Running {
			t.Errorf("the running job: got %+v %v", st, err)
		}
	})
}

// A held job that ends within its wait answers as a call, and was never
// seen; one that runs longer is shown at the wait's end, found by its
// owner, and runs on apart from its caller; a caller gone before then
// cancels it; a held job becomes a job past MaxPerOwner.
func TestHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, Options{MaxPerOwner: 1})
		// Quick: answered as a call.
		res, _, shown, err := r.Hold(t.Context(), "alice", "run_sql", 5*time.Second, func(ctx context.Context, _ func(Meter)) (any, error) {
			time.Sleep(time.Second)
			return "rows", nil
		})
		if res != "rows" || shown || err != nil || len(r.List(alice)) != 0 {
			t.Fatalf("quick: got %v shown %v %v, jobs %v; want the result, no job", res, shown, err, r.List(alice))
		}
		_, _, _, err = r.Hold(t.Context(), "alice", "run_sql", 5*time.Second, func(context.Context, func(Meter)) (any, error) {
			return nil, errors.New("syntax")
		})
		if err == nil || err.Error() != "syntax" || len(r.List(alice)) != 0 {
			t.Fatalf("quick failure: got %v, want its error, no job", err)
		}
		// Slow: shown after 5 s, twice (past MaxPerOwner 1), and the
		// caller's end does not stop it.
		ctx, cancel := context.WithCancel(t.Context())
		release := make(chan struct{})
		slow := func(ctx context.Context, _ func(Meter)) (any, error) {
			select {
			case <-release:
				return "late rows", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		start := time.Now()
		_, st, shown, err := r.Hold(ctx, "alice", "run_sql", 5*time.Second, slow)
		if !shown || err != nil || st.State != Running || time.Since(start) != 5*time.Second {
			t.Fatalf("slow: got %+v shown %v %v after %v, want a running job at 5s", st, shown, err, time.Since(start))
		}
		if _, _, shown, err := r.Hold(ctx, "alice", "query", 5*time.Second, slow); !shown || err != nil {
			t.Fatalf("second slow: shown %v %v, want a job past MaxPerOwner", shown, err)
		}
		cancel()
		close(release)
		got, err := r.Wait(t.Context(), alice, st.ID, time.Minute)
		if err != nil || got.State != Done || got.Result != "late rows" {
			t.Errorf("shown job: got %+v %v, want done with its result", got, err)
		}
		if n := len(r.List(alice)); n != 2 {
			t.Errorf("jobs listed: %d, want 2", n)
		}
		// A caller gone within the wait cancels the held run.
		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		stopped := false
		_, _, shown, err = r.Hold(ctx, "alice", "run_sql", 5*time.Second, func(ctx context.Context, _ func(Meter)) (any, error) {
			<-ctx.Done()
			stopped = true
			return nil, ctx.Err()
		})
		if shown || !errors.Is(err, context.Canceled) || !stopped {
			t.Errorf("caller gone: shown %v, %v, run stopped %v; want cancelled", shown, err, stopped)
		}
	})
}

// A job started with a shorter keep expires after it, and is forgotten
// after twice as long; a longer keep is the registry's.
func TestStartKeep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, Options{Keep: time.Hour})
		quick := func(context.Context, func(Meter)) (any, error) { return "rows", nil }
		short, _ := r.StartKeep(t.Context(), "alice", "run_sql", time.Minute, quick)
		long, _ := r.StartKeep(t.Context(), "alice", "run_sql", 2*time.Hour, quick)
		if short.Keep != time.Minute || long.Keep != time.Hour {
			t.Errorf("keeps: got %v and %v, want 1m and the registry's 1h", short.Keep, long.Keep)
		}
		synctest.Wait()
		time.Sleep(time.Minute + time.Second)
		if st, _ := r.Get(alice, short.ID); st.State != Expired {
			t.Errorf("after its keep: got %s, want expired", st.State)
		}
		if st, _ := r.Get(alice, long.ID); st.State != Done || st.Result != "rows" {
			t.Errorf("the other: got %s %v, want done with its result", st.State, st.Result)
		}
		time.Sleep(time.Minute)
		if _, err := r.Get(alice, short.ID); lakegate.KindOf(err) != lakegate.KindNotFound {
			t.Errorf("after twice its keep: got %v, want forgotten", err)
		}
	})
}

// TestJobGrowsItsStack: a job's work, on a goroutine of its own, makes a
// deep call without copying its stack again (it runs the query's whole
// path).
func TestJobGrowsItsStack(t *testing.T) {
	if !testutil.OnNewGoroutine(testutil.DeepCallCopiesStack) {
		t.Skip("a new goroutine's stack already holds 12 KiB here: nothing to compare with")
	}
	r := newRegistry(t, Options{})
	copied := make(chan bool, 1)
	st, err := r.Start(t.Context(), "alice", "run_sql", func(context.Context, func(Meter)) (any, error) {
		copied <- testutil.DeepCallCopiesStack()
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if <-copied {
		t.Errorf("job %s: a call with a 12 KiB frame copied its stack", st.ID)
	}
}
