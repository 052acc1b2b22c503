package tools

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/query"
)

// progressEvery is how often a running tool call reports progress when
// the client asked for it.
const progressEvery = time.Second

// observe wraps a tool handler with the protocol's side channels:
// progress notifications (start, one a second while running, finish) when
// the request carries a progress token, and one notifications/message log
// line per call at the level the client set with logging/setLevel.
// Cancellation needs nothing here: the SDK cancels ctx on
// notifications/cancelled and the engine stops the database query.
func observe(name string, h mcpsdk.ToolHandler) mcpsdk.ToolHandler {
	return func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		start := time.Now()
		pr := &progress{}
		ctx = context.WithValue(ctx, progressKey{}, pr)
		stop := reportProgress(ctx, req, name, pr)
		res, err := h(ctx, req)
		stop()
		if req.Session != nil {
			//lint:ignore SA1019 the 2025 protocol revisions, which lakegate still serves, have logging; SEP-2577 keeps it for at least twelve months
			level, outcome := mcpsdk.LoggingLevel("info"), "ok"
			switch {
			case err != nil:
				level, outcome = "error", "protocol error"
			case res != nil && res.IsError:
				level, outcome = "warning", "tool error"
			}
			//lint:ignore SA1019 the 2025 protocol revisions, which lakegate still serves, have logging; SEP-2577 keeps it for at least twelve months
			_ = req.Session.Log(ctx, &mcpsdk.LoggingMessageParams{
				Level:  level,
				Logger: "lakegate",
				Data: map[string]any{"tool": name, "outcome": outcome,
					"duration_ms": time.Since(start).Milliseconds()},
			})
		}
		return res, err
	}
}

// reportProgress sends the start notification and a tick a second until
// the returned stop is called, which sends the last one and waits for the
// ticker goroutine. Without a progress token it does nothing.
func reportProgress(ctx context.Context, req *mcpsdk.CallToolRequest, name string, pr *progress) (stop func()) {
	if req.Session == nil || req.Params == nil || req.Params.GetProgressToken() == nil {
		return func() {}
	}
	token := req.Params.GetProgressToken()
	notify := func(n float64, msg string) {
		_ = req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{
			ProgressToken: token, Progress: n, Message: msg})
	}
	start := time.Now()
	notify(0, name+": started")
	done, finished := make(chan struct{}), make(chan float64)
	go func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		n := 0.0
		for {
			select {
			case <-t.C:
				n++
				notify(n, fmt.Sprintf("%s: running for %s%s", name, time.Since(start).Round(time.Second), pr.soFar()))
			case <-done:
				finished <- n
				return
			}
		}
	}()
	return func() {
		close(done)
		n := <-finished
		notify(n+1, fmt.Sprintf("%s: finished in %s%s", name, time.Since(start).Round(time.Millisecond), pr.soFar()))
	}
}

// progress is where a running tool call shows how far its result has got.
type progress struct {
	of atomic.Pointer[query.Progress]
}

type progressKey struct{}

// soFar is ", N rows, M bytes" once a streamed result has begun.
func (pr *progress) soFar() string {
	t := pr.of.Load()
	if t == nil {
		return ""
	}
	return fmt.Sprintf(", %d rows, %d bytes", t.Rows(), t.Bytes())
}

// reportRows makes the progress notifications of the call running in ctx
// report the rows and bytes of qp.
func reportRows(ctx context.Context, qp *query.Progress) {
	if pr, ok := ctx.Value(progressKey{}).(*progress); ok {
		pr.of.Store(qp)
	}
}
