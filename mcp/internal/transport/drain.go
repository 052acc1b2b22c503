package transport

import (
	"context"
	"time"
)

// Drain is the sessions' part of the plugin's shutdown, run once: it
// refuses new sessions, has stopRequests let the protocol requests running
// finish until ctx ends and stop the rest (it returns how many it
// stopped), then closes every session, its answers sent first, and
// returns once their streams have ended.
func (r *Sessions) Drain(ctx context.Context, stopRequests func(context.Context) int) {
	r.shut()
	if n := stopRequests(ctx); n > 0 {
		r.log.Warn("drain timeout: MCP requests stopped, each answered that the server is shutting down", "requests", n)
		r.awaitAnswers(answerWait)
		// Clients (go-sdk's among them) may drop an answer they have not
		// handed on yet when its session's streams end at once: give
		// them a moment to take it.
		time.Sleep(answerLinger)
	}
	r.closeAll(true)
	r.wait()
}
