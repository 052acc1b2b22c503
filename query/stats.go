package query

import (
	"context"
	"time"
)

// PoolStats is a snapshot of one PostgreSQL database's connection pool.
type PoolStats struct {
	Database string
	// Acquired, Idle and Total are connections now; Max is the pool's cap.
	Acquired, Idle, Total, Max int32
	// AcquireCount counts acquisitions since start; EmptyAcquireCount
	// those that had to wait for a connection; AcquireDuration is their
	// total wait.
	AcquireCount      int64
	EmptyAcquireCount int64
	AcquireDuration   time.Duration
}

// PoolStats reports the connection pool of every PostgreSQL database,
// sorted by name (SQLite databases have no pool).
func (e *Engine) PoolStats() []PoolStats {
	var out []PoolStats
	for _, n := range e.names {
		pg, ok := e.sources[n].(*pgSource)
		if !ok {
			continue
		}
		st := pg.pool.Stat()
		out = append(out, PoolStats{
			Database:          n,
			Acquired:          st.AcquiredConns(),
			Idle:              st.IdleConns(),
			Total:             st.TotalConns(),
			Max:               st.MaxConns(),
			AcquireCount:      st.AcquireCount(),
			EmptyAcquireCount: st.EmptyAcquireCount(),
			AcquireDuration:   st.AcquireDuration(),
		})
	}
	return out
}

// BreakerState is the state of a database's circuit breaker.
type BreakerState string

// The breaker states.
const (
	BreakerClosed   BreakerState = "closed"    // calls go through
	BreakerOpen     BreakerState = "open"      // calls are refused for now
	BreakerHalfOpen BreakerState = "half_open" // one probe may go through
)

// BreakerStates reports the circuit breaker state of every database.
func (e *Engine) BreakerStates() map[string]BreakerState {
	out := make(map[string]BreakerState, len(e.names))
	for _, n := range e.names {
		out[n] = e.breakers[n].state()
	}
	return out
}

func (b *breaker) state() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.openUntil.IsZero():
		return BreakerClosed
	case b.probing || !b.now().Before(b.openUntil):
		return BreakerHalfOpen
	default:
		return BreakerOpen
	}
}

// PingEach pings every database, each under ctx, and returns the error of
// each that failed, keyed by name (nil when all answered). The errors are
// *Error: safe to show.
func (e *Engine) PingEach(ctx context.Context) map[string]error {
	var failed map[string]error
	for _, n := range e.names {
		if err := e.pingOne(ctx, n); err != nil {
			if failed == nil {
				failed = map[string]error{}
			}
			failed[n] = err
		}
	}
	return failed
}
