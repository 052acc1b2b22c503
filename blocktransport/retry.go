package blocktransport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of the Client's retry options.
const (
	// DefaultAttempts is how many times one request (the manifest or a
	// block) is tried when it fails.
	DefaultAttempts = 6
	// DefaultBackoff is the wait before the first retry of a failure.
	DefaultBackoff = 250 * time.Millisecond
	// DefaultMaxRetryAfter is the longest wait a server may ask for;
	// asked to wait longer, the client gives up at once.
	DefaultMaxRetryAfter = time.Minute
)

// maxBackoff caps the doubling backoff of failures.
const maxBackoff = 10 * time.Second

// maxThrottled bounds the 429 answers one request may get. They are not
// failures (the server is well and asks to wait), so they do not use the
// attempts; with several requests in flight one of them can lose the
// race for the next token a few times in a row.
const maxThrottled = 100

// Retry describes a request about to be tried again, for Client.Retrying.
type Retry struct {
	// Block is the block's number, or -1 for the manifest.
	Block int
	// Attempt is the number of the attempt that failed, from 1 (429
	// answers included).
	Attempt int
	// Wait is how long the client waits before the next attempt.
	Wait time.Duration
	// Err is why the attempt failed.
	Err error
}

// pacer is the "not before" time shared by the requests of one fetch: a
// server that answers 429 or names a Retry-After pauses them all, not
// only the request it answered.
type pacer struct {
	mu        sync.Mutex
	notBefore time.Time
}

// hold makes every request wait until t.
func (p *pacer) hold(t time.Time) {
	p.mu.Lock()
	if t.After(p.notBefore) {
		p.notBefore = t
	}
	p.mu.Unlock()
}

// wait returns when the pause is over or ctx is done.
func (p *pacer) wait(ctx context.Context) error {
	for {
		p.mu.Lock()
		d := time.Until(p.notBefore)
		p.mu.Unlock()
		if d <= 0 {
			return ctx.Err()
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retry runs try until it succeeds, ctx ends, or the policy gives up:
// network errors, 5xx and 408 answers and damaged data are retried up to
// Attempts times with doubling, jittered waits (at least the server's
// Retry-After); 429 answers wait as the server asks (all requests of the
// pacer wait) and are bounded by maxThrottled; any other answer is final.
// block names the request for Retrying (-1: the manifest).
func (c *Client) retry(ctx context.Context, p *pacer, block int, try func(context.Context) error) error {
	attempts := c.Attempts
	if attempts <= 0 {
		attempts = DefaultAttempts
	}
	maxWait := c.MaxRetryAfter
	if maxWait <= 0 {
		maxWait = DefaultMaxRetryAfter
	}
	var failures, throttled int
	var lastBad string // the sum of the last damaged copy
	for attempt := 1; ; attempt++ {
		if err := p.wait(ctx); err != nil {
			return err
		}
		err := try(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		var (
			se     *StatusError
			ce     *ChecksumError
			wait   time.Duration
			paused bool // the server named a wait: every request honours it
		)
		switch {
		case errors.As(err, &se) && se.Code == http.StatusTooManyRequests:
			if throttled++; throttled > maxThrottled {
				return fmt.Errorf("refused %d times with 429: %w", throttled, err)
			}
			wait, paused = c.backoff(throttled), true
			if se.RetryAfter > 0 {
				wait = se.RetryAfter
			}
		case errors.As(err, &se) && se.Code < 500 && se.Code != http.StatusRequestTimeout:
			return err
		case final(err):
			return err
		case errors.As(err, &ce) && ce.Got == lastBad:
			// The same damaged copy twice: the server's data is bad.
			return err
		default:
			if errors.As(err, &ce) {
				lastBad = ce.Got
			}
			if failures++; failures >= attempts {
				return fmt.Errorf("after %d attempts: %w", failures, err)
			}
			wait = c.backoff(failures)
			if se != nil && se.RetryAfter > wait {
				wait, paused = se.RetryAfter, true
			}
		}
		if wait > maxWait {
			return fmt.Errorf("%w (the server asks to wait %s: try again later)", err, wait.Round(time.Second))
		}
		if paused {
			// Never sooner than asked; a little later, so that parallel
			// clients do not all come back at once.
			wait += rand.N(wait/10 + 10*time.Millisecond)
		}
		if c.Retrying != nil {
			c.Retrying(Retry{Block: block, Attempt: attempt, Wait: wait, Err: err})
		}
		if paused {
			p.hold(time.Now().Add(wait))
		} else if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// backoff is the wait before retry n (from 1): Backoff doubled n-1 times,
// at most maxBackoff, with "equal jitter" (between half and all of it).
func (c *Client) backoff(n int) time.Duration {
	base := c.Backoff
	if base <= 0 {
		base = DefaultBackoff
	}
	d := base
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, max(maxBackoff, base))
	return d/2 + rand.N(d/2+1)
}

// finalError marks a failure that trying again cannot cure.
type finalError struct{ error }

func (e finalError) Unwrap() error { return e.error }

// final reports whether a failure cannot be cured by trying again: a
// finalError, or a TLS refusal on either side (crypto/tls reports the
// peer's alert as a *net.OpError with Op "remote error").
func final(err error) bool {
	var (
		fe       finalError
		remote   *net.OpError
		verify   *tls.CertificateVerificationError
		alert    tls.AlertError
		header   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	if errors.As(err, &remote) && remote.Op == "remote error" {
		return true
	}
	return errors.As(err, &fe) || errors.As(err, &verify) || errors.As(err, &alert) || errors.As(err, &header) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}
