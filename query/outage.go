package query

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/backoff"
)

// A database outage is a state, not an exit: Open serves without a
// PostgreSQL database it cannot reach (or whose roles it cannot check
// yet), and a watcher connects again with backoff until it can, then
// checks the roles (privilege.go) and serves it. Until then every request
// for it, /ready and the console say why, in the words of outageCause:
// refused, DNS, TLS, authentication, too many connections, in recovery.
// The first log line of an outage says it too, once; a later line only
// when the cause changes. An outage of a database already served is the
// breaker's (retry.go), which logs its own start and end the same way.
//
// A role check that finds a privilege at start stops Open, as before (a
// setting to fix, not an outage); found later, after an outage, it keeps
// the database unserved and is logged as the cause.

// outageBackoff is the watcher's pause between connection attempts: a
// second doubled up to 30 s, with equal jitter, so that a fleet of
// replicas does not reconnect in step.
var outageBackoff = backoff.Policy{Base: time.Second, Cap: 30 * time.Second}

// gate holds a database's state: served, or not yet and why.
type gate struct {
	ready atomic.Bool

	mu    sync.Mutex
	err   *lakegate.Error // why not served, while !ready
	since time.Time       // when the outage began
	next  time.Time       // the next attempt
}

// refusal is the error a request for the database gets while it is not
// served; nil once it is.
func (g *gate) refusal() error {
	if g.ready.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e := *g.err
	e.RetryAfter = max(time.Until(g.next), time.Second).Round(time.Second)
	return &e
}

// fail records err as why the database is not served and reports whether
// the cause is new (first of the outage, or changed), to be logged.
func (g *gate) fail(err *lakegate.Error, next time.Time) (changed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	changed = g.err == nil || g.err.Message != err.Message
	if g.err == nil {
		g.since = time.Now()
	}
	g.err, g.next = err, next
	return changed
}

// connect makes database name servable: it pings it and, for PostgreSQL,
// checks the roles callers' SQL runs as (readURLs are its standbys).
func (e *Engine) connect(ctx context.Context, name string, readURLs []string) error {
	src := e.sources[name]
	if err := src.ping(ctx); err != nil {
		return unavailable(name, err)
	}
	pg, ok := src.(*pgSource)
	if !ok {
		return nil
	}
	return e.guard(ctx, name, pg, readURLs)
}

// admit tries once to connect database name at start. A privilege finding
// is returned (Open fails); any other failure starts the watcher, and the
// database is served once it answers.
func (e *Engine) admit(ctx context.Context, name string, readURLs []string) error {
	g := e.gates[name]
	err := e.connect(ctx, name, readURLs)
	if err == nil {
		g.ready.Store(true)
		return nil
	}
	if lakegate.KindOf(err) == lakegate.KindValidation {
		return err
	}
	first := outageBackoff.Delay(1)
	g.fail(gateErr(name, err), time.Now().Add(first))
	e.logOutage(name, "database is not served until it answers; retrying", err)
	e.watchers.Add(1)
	go e.watch(name, readURLs, first)
	return nil
}

// watch connects database name again, with backoff, until it is served or
// the engine closes.
func (e *Engine) watch(name string, readURLs []string, wait time.Duration) {
	defer e.watchers.Done()
	g := e.gates[name]
	for attempt := 2; ; attempt++ {
		if !backoff.Wait(e.stopping, wait) {
			return
		}
		ctx, cancel := context.WithTimeout(e.stopping, max(e.opts.StatementTimeout, connectTimeout))
		err := e.connect(ctx, name, readURLs)
		cancel()
		if err == nil {
			g.ready.Store(true)
			g.mu.Lock()
			down := time.Since(g.since).Round(time.Second)
			g.mu.Unlock()
			e.log.Info("database answers: serving it", logKeyDatabase, name, "unavailable_for", down.String())
			return
		}
		if e.stopping.Err() != nil {
			return
		}
		wait = outageBackoff.Delay(attempt)
		if g.fail(gateErr(name, err), time.Now().Add(wait)) {
			e.logOutage(name, "database still not served: the cause changed; retrying", err)
		}
	}
}

// logOutage logs the cause of database name's outage with the whole
// error (addresses, names; never a password): a privilege finding, which
// only the operator can fix, at ERROR, the rest at WARN.
func (e *Engine) logOutage(name, msg string, err error) {
	ge := asError(name, err)
	args := []any{logKeyDatabase, name, "cause", ge.Message, "hint", ge.Hint}
	if ge.Err != nil {
		args = append(args, lakegate.LogError, redacted(ge.Err))
	}
	if ge.Kind == lakegate.KindValidation {
		e.log.Error(msg, args...)
		return
	}
	e.log.Warn(msg, args...)
}

// redacted is err's message without the password of a failed connect
// (pgx does not print it; this keeps it so).
func redacted(err error) string {
	msg := err.Error()
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Config != nil && ce.Config.Password != "" {
		msg = strings.ReplaceAll(msg, ce.Config.Password, "xxxxx")
	}
	return msg
}

// asError is err as an *Error of database name.
func asError(name string, err error) *lakegate.Error {
	var le *lakegate.Error
	if errors.As(err, &le) {
		return le
	}
	return unavailable(name, err)
}

// gateErr is err as callers and /ready see it while database name is not
// served: a privilege finding is unavailable to them, and names no role
// (the log does).
func gateErr(name string, err error) *lakegate.Error {
	le := asError(name, err)
	if le.Kind != lakegate.KindValidation {
		return le
	}
	return &lakegate.Error{Kind: lakegate.KindUnavailable,
		Message: fmt.Sprintf("database %q is not served: callers' SQL would run as a privileged PostgreSQL role (the server's log says which)", name),
		Hint:    "the operator fixes the database's roles; it is served once they pass", Err: err}
}

// Unserved reports every database not served now — not connected since
// start, or its breaker open — with why, keyed by name (nil: none).
func (e *Engine) Unserved() map[string]error {
	var out map[string]error
	for _, n := range e.names {
		err := e.gates[n].refusal()
		if err == nil {
			err = e.breakers[n].refusal(n)
		}
		if err != nil {
			if out == nil {
				out = map[string]error{}
			}
			out[n] = err
		}
	}
	return out
}

// unavailable is the error of a database that is down or cannot be
// reached, saying why and what to check. The cause is a category, safe
// for any caller: addresses, user and database names stay in the log
// (logOutage), which has err whole.
func unavailable(db string, err error) *lakegate.Error {
	cause, advice := outageCause(err)
	return &lakegate.Error{Kind: lakegate.KindUnavailable, Message: fmt.Sprintf("database %q is unavailable: %s", db, cause),
		Hint: advice, RetryAfter: time.Second, Err: err}
}

// outageCause says in a few words why a database cannot be reached —
// refused, DNS, TLS, authentication, too many connections, starting or in
// recovery — and what to check.
func outageCause(err error) (cause, advice string) {
	const later = "retry later"
	const tlsAdvice = "check sslmode, sslrootcert and the server's certificate"
	var (
		pe   *pgconn.PgError
		dns  *net.DNSError
		op   *net.OpError
		cert *tls.CertificateVerificationError
		ua   x509.UnknownAuthorityError
		hn   x509.HostnameError
		rec  tls.RecordHeaderError
		ce   *pgconn.ConnectError
	)
	switch {
	case errors.As(err, &pe):
		switch pe.Code {
		case "28P01", "28000":
			return "authentication failed", "check the user and password of the database URL, and pg_hba.conf"
		case "53300":
			return "too many connections", "raise max_connections on the server, or lower pool_size on the replicas; " + later
		case "57P03":
			return "the server is starting up, shutting down or in recovery", later
		case "3D000":
			return "the configured database does not exist on the server", "create it, or fix the database URL"
		case "57P01", "57P02":
			return "the server shut down or restarted", later
		}
		return fmt.Sprintf("the server cannot serve it now (SQLSTATE %s)", pe.Code), later
	case errors.As(err, &dns):
		return "the server's host name does not resolve (DNS)", "check the host of the database URL and the resolver"
	case errors.As(err, &cert), errors.As(err, &ua), errors.As(err, &hn), errors.As(err, &rec):
		return "TLS: the server's certificate or handshake was refused", tlsAdvice
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused", "check that PostgreSQL runs and listens at the database URL's host and port; " + later
	case errors.As(err, &op) && op.Timeout(), errors.As(err, &ce) && errors.Is(err, context.DeadlineExceeded):
		return "no answer in time", "check the host, the port and the network path (a firewall dropping packets); " + later
	case errors.As(err, &ce) && strings.Contains(strings.ToLower(err.Error()), "tls"):
		return "TLS: the connection could not be secured", tlsAdvice
	case errors.As(err, &op), errors.As(err, &ce):
		return "the connection failed", later
	}
	return "the connection was lost", later
}
