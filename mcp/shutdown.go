package mcp

import (
	"context"
	"sync"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/query"
)

// inflight tracks the protocol requests being handled, so that Close can
// cancel them when its deadline passes: the SDK's session Close waits for
// a session's requests to finish, and a tool call's query may otherwise
// run until its statement timeout, long past the server's drain. Safe for
// concurrent use; the zero value is ready.
type inflight struct {
	mu      sync.Mutex
	next    uint64
	cancels map[uint64]context.CancelFunc
	stopped bool // cancelAll was called: new requests are refused
}

// cancelOnClose is receiving middleware: every request runs under a
// context that cancelAll ends.
func (p *Plugin) cancelOnClose(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		id, ok := p.requests.add(cancel)
		if !ok {
			return nil, query.Errorf(query.KindUnavailable, "server is shutting down")
		}
		defer p.requests.remove(id)
		return next(ctx, method, req)
	}
}

func (f *inflight) add(cancel context.CancelFunc) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return 0, false
	}
	if f.cancels == nil {
		f.cancels = map[uint64]context.CancelFunc{}
	}
	f.next++
	f.cancels[f.next] = cancel
	return f.next, true
}

func (f *inflight) remove(id uint64) {
	f.mu.Lock()
	delete(f.cancels, id)
	f.mu.Unlock()
}

// cancelAll cancels every request in flight and refuses new ones.
func (f *inflight) cancelAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	for _, cancel := range f.cancels {
		cancel()
	}
}
