package query

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/backoff"
)

// Defaults of the retry and breaker Options. The cooldown is short so
// that calls succeed again within a second of the database being back (a
// probe every half second costs a database that is down nothing).
const (
	DefaultRetryAttempts   = 3
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 500 * time.Millisecond
)

// retryBackoff is the pause between attempts: 50 ms doubled per attempt
// up to a second, with equal jitter, so that clients that failed together
// do not come back together.
var retryBackoff = backoff.Policy{Base: 50 * time.Millisecond, Cap: time.Second}

// attemptFunc runs one attempt under ctx (which carries the statement
// timeout). It returns whether it has already handed output to the caller
// (then a failure cannot be retried) and its raw error.
type attemptFunc func(ctx context.Context) (started bool, err error)

// retry runs fn through database db's breaker, again after transient
// failures (see diagnose): at most Options.RetryAttempts attempts, pausing
// with backoff, never past ctx's deadline nor, in all, past the statement
// timeout. The error is classified.
func (e *Engine) retry(ctx context.Context, s *Stmt, fn attemptFunc) error {
	// Every statement Run runs only reads (BEGIN READ ONLY; SQLite opened
	// read-only): running it again after a lost connection or a conflict
	// repeats nothing.
	const readOnly = true
	db := s.Database
	br := e.breakers[db]
	timeout := s.timeout
	if s.src.dialect() == Postgres {
		timeout += stmtGrace
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		probe, refused := br.allow(db)
		if refused != nil {
			return refused
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		started, err := fn(actx)
		f := diagnose(actx, err)
		cancel()
		cerr := f.error(db)
		switch br.record(probe, f.outcome(), cerr) {
		case breakerOpened:
			e.logOutage(db, "database does not answer: refusing its queries for now, probing it", cerr)
		case breakerClosed:
			e.log.Info("database answers again", logKeyDatabase, db)
		}
		if err == nil {
			return nil
		}
		if !f.retry().safe(readOnly) || started || attempt >= e.opts.RetryAttempts {
			return cerr
		}
		d := retryBackoff.Delay(attempt)
		if time.Since(start)+d > s.timeout {
			return cerr
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return cerr
		}
		e.log.Debug("retrying query after a transient failure", logKeyDatabase, db, "attempt", attempt, lakegate.LogError, err)
		if !backoff.Wait(ctx, d) {
			return cerr
		}
	}
}

// outcome is what one attempt tells the breaker.
type outcome int

const (
	outcomeNeutral outcome = iota // the caller gave up or timed out: says nothing of the database
	outcomeSuccess                // the database answered (an error in the SQL, a conflict, are answers)
	outcomeFailure                // the database, or the way to it, is down (fault.outcome)
)

// breaker is one database's circuit breaker: after threshold failures in
// a row that say the database is down (fault.outcome) it opens and refuses
// every call for cooldown; then it lets one probe through (half-open),
// which closes it on success and opens it again on failure. It is safe for
// concurrent use.
//
// Our own rather than sony/gobreaker: we need the time left open for
// RetryAfter, our own idea of which failures count (a database down, not
// a conflict; timeouts and cancels are neutral), and no new module for
// ~60 lines.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time

	mu        sync.Mutex
	failures  int
	openUntil time.Time // zero while closed
	probing   bool      // a half-open probe is out
	cause     error     // the last failure, while open
}

// transition is a change of a breaker's state, to be logged: one line
// when an outage begins, one when it ends.
type transition int

const (
	breakerSteady transition = iota
	breakerOpened
	breakerClosed
)

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, now: time.Now}
}

// allow says whether a call to database db may go ahead, and whether it
// is the probe: a call it refuses gets the refusal, made under the same
// lock (a breaker closing between the two would otherwise refuse the call
// with no error, and the caller take a statement never run for done).
func (b *breaker) allow(db string) (probe bool, refused error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openUntil.IsZero() {
		return false, nil
	}
	if b.openUntil.After(b.now()) || b.probing {
		return false, b.refusalLocked(db)
	}
	b.probing = true
	return true, nil
}

// refusal is the error of a call the open breaker of database db refuses,
// with the cause of the last failure and how long to wait; nil while the
// breaker lets calls through.
func (b *breaker) refusal(db string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openUntil.IsZero() || !b.openUntil.After(b.now()) && !b.probing {
		return nil
	}
	return b.refusalLocked(db)
}

// refusalLocked is the refusal of a call to database db while the breaker
// is open or its probe is out. b.mu is held.
func (b *breaker) refusalLocked(db string) *lakegate.Error {
	wait := b.openUntil.Sub(b.now())
	if wait <= 0 { // open no longer, but the probe is out
		wait = min(b.cooldown, time.Second)
	}
	e := &lakegate.Error{Kind: lakegate.KindUnavailable,
		Message: fmt.Sprintf("database %q is unavailable: too many failures in a row, not trying for now", db),
		Hint:    "retry later", RetryAfter: wait}
	if le, ok := b.cause.(*lakegate.Error); ok {
		e.Message = le.Message + " (not trying for now)"
		e.Hint = le.Hint
	}
	return e
}

// record takes the outcome of a call allow let through, and err, the
// call's classified error; it reports whether the breaker opened or
// closed.
func (b *breaker) record(probe bool, o outcome, err error) transition {
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	wasOpen := !b.openUntil.IsZero()
	switch o {
	case outcomeSuccess:
		b.failures, b.openUntil, b.cause = 0, time.Time{}, nil
		if wasOpen {
			return breakerClosed
		}
	case outcomeFailure:
		b.failures++
		if probe || b.failures >= b.threshold {
			b.openUntil, b.cause = b.now().Add(b.cooldown), err
			if !wasOpen {
				return breakerOpened
			}
		}
	}
	return breakerSteady
}
