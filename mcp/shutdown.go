package mcp

import (
	"context"
	"errors"
	"sync"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// inflight tracks the protocol requests being handled, so that Shutdown can
// let them finish within its deadline and then stop those still running:
// the SDK's session Close waits for a session's requests, and a tool
// call's query may otherwise run until its statement timeout, long past
// the server's drain. Safe for concurrent use; the zero value is ready.
type inflight struct {
	mu      sync.Mutex
	next    uint64
	cancels map[uint64]context.CancelCauseFunc
	stopped bool          // no new requests: the server is shutting down
	idle    chan struct{} // made by stop, closed once none runs
}

// middleware is receiving middleware: every request runs under a
// context that cancelAll ends. A request stopped that way, or arriving
// once the server is shutting down, answers lakegate.ErrShuttingDown (a tool
// call as a tool error, like its other errors).
func (f *inflight) middleware(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		id, ok := f.add(cancel)
		if !ok {
			return shuttingDown(method)
		}
		defer f.remove(id)
		res, err := next(ctx, method, req)
		if errors.Is(context.Cause(ctx), lakegate.ErrShuttingDown) {
			return shuttingDown(method)
		}
		return res, err
	}
}

func shuttingDown(method string) (mcpsdk.Result, error) {
	if method == "tools/call" {
		return wire.ErrorResult(lakegate.ErrShuttingDown), nil
	}
	return nil, lakegate.ErrShuttingDown
}

func (f *inflight) add(cancel context.CancelCauseFunc) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return 0, false
	}
	if f.cancels == nil {
		f.cancels = map[uint64]context.CancelCauseFunc{}
	}
	f.next++
	f.cancels[f.next] = cancel
	return f.next, true
}

func (f *inflight) remove(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.cancels, id)
	if f.stopped && len(f.cancels) == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// finish refuses new requests and waits until those running have ended or
// ctx is done; then it stops those left (their answer: shutting down) and
// reports how many it stopped.
func (f *inflight) finish(ctx context.Context) (stopped int) {
	f.mu.Lock()
	f.stopped = true
	idle := make(chan struct{})
	if len(f.cancels) == 0 {
		close(idle)
	} else {
		f.idle = idle
	}
	f.mu.Unlock()
	select {
	case <-idle:
		return 0
	case <-ctx.Done():
	}
	return f.cancelAll()
}

// cancelAll stops every request in flight and refuses new ones.
func (f *inflight) cancelAll() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	for _, cancel := range f.cancels {
		cancel(lakegate.ErrShuttingDown)
	}
	return len(f.cancels)
}
