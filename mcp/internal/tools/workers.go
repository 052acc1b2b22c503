package tools

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/query"
)

// localWorkers is the plugin's own pool when the host gives none.
type localWorkers struct {
	slots   chan struct{}
	wait    time.Duration
	waiting atomic.Int64
}

var _ host.Workers = (*localWorkers)(nil)

func newLocalWorkers(n int, wait time.Duration) *localWorkers {
	return &localWorkers{slots: make(chan struct{}, n), wait: wait}
}

func (w *localWorkers) Acquire(ctx context.Context) (func(), error) {
	release := sync.OnceFunc(func() { <-w.slots })
	select {
	case w.slots <- struct{}{}:
		return release, nil
	default:
	}
	w.waiting.Add(1)
	defer w.waiting.Add(-1)
	timer := time.NewTimer(w.wait)
	defer timer.Stop()
	select {
	case w.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the request ended while waiting for a worker", Err: ctx.Err()}
	case <-timer.C:
		return nil, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "all MCP workers are busy",
			Hint: "retry shortly", RetryAfter: time.Second}
	}
}

func (w *localWorkers) Use() host.WorkerStatus {
	return host.WorkerStatus{Max: cap(w.slots), InUse: len(w.slots), Waiting: int(w.waiting.Load())}
}

// worker is the slot of ts.workers a tool call holds: the host's shared
// pool, which also applies its per-subject limits, or the plugin's own. A
// job that takes the call over keeps it until the job ends.
type worker struct {
	release func()
	kept    bool
}

// acquire takes a worker for a call.
func (ts *Set) acquire(ctx context.Context) (*worker, error) {
	release, err := ts.workers.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &worker{release: sync.OnceFunc(release)}, nil
}

// done releases the call's worker, unless a job keeps it. Nil (a tool
// that takes none) does nothing.
func (w *worker) done() {
	if w != nil && !w.kept {
		w.release()
	}
}

// keep hands the worker to a job, which calls the returned release when
// it ends; done then leaves it. Nil gives a release that does nothing.
func (w *worker) keep() func() {
	if w == nil {
		return func() {}
	}
	w.kept = true
	return w.release
}

// Admit takes a worker of the pool for one piece of database work apart
// from a tool call (a subscription's look at its table), waiting its turn
// as a tail does (query.Patient); the returned func releases it.
func (ts *Set) Admit(ctx context.Context) (func(), error) {
	return query.Patient(func(ctx context.Context) (func(), error) {
		w, err := ts.acquire(ctx)
		if err != nil {
			return nil, err
		}
		return w.done, nil
	})(ctx)
}
