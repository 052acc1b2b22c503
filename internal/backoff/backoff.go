// Package backoff is the pause between attempts at something that failed:
// a base doubled per attempt up to a cap, half of it fixed and half random
// ("equal jitter"), so that clients that failed together (a fleet of
// replicas, the queries of one outage) do not come back together.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is a base and a cap: the pause before attempt n+1 is about
// Base·2^(n-1), at most Cap.
type Policy struct {
	Base, Cap time.Duration
}

// Delay is the pause before attempt n+1 (n >= 1): between half and all of
// min(Base·2^(n-1), Cap).
func (p Policy) Delay(n int) time.Duration {
	d := p.Base
	for i := 1; i < n && d < p.Cap; i++ {
		d *= 2
	}
	d = min(d, p.Cap)
	return d/2 + rand.N(d/2+1)
}

// Wait pauses for d, or until ctx ends, and reports whether the pause
// ran out (false: ctx ended).
func Wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
