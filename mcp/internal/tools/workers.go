package tools

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
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
