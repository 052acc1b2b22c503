package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/internal/backoff"
	"github.com/lakegate/lakegate/internal/httperr"
)

// Any replica serves any request. A replica gives the ids of its sessions
// and block transfers its own prefix; a request for an id of another
// replica (a POST /mcp/messages/ for an SSE stream open elsewhere, a
// Streamable HTTP request of a session opened elsewhere, a block read) is
// forwarded to that replica, which answers it as if it had come directly:
// it checks the caller's own bearer token and the session's owner as
// always: the forward passes the caller's Authorization header on and
// adds nothing. So replicas need no trust of their own between them for
// these, only the JWT keys they already share; a forwarded request is
// never forwarded again. The one exception is a block read a replica
// makes on a caller's behalf (replica.go), signed with cluster_secret.
// The replicas' addresses are in the table lakegate_cluster_replicas.

// PrefixLen is the length of a replica's prefix (hex).
const PrefixLen = 8

// ForwardedHeader marks a forwarded request with the prefix of the replica
// that forwarded it.
const ForwardedHeader = "X-Lakegate-Forwarded-By"

const replicasSchema = `CREATE TABLE IF NOT EXISTS lakegate_cluster_replicas (
	prefix text PRIMARY KEY,
	url text,
	started_at timestamptz NOT NULL DEFAULT now())`

// Peers is this replica's place in the cluster: its prefix, and the way to
// the others. Build it with OpenPeers, then Advertise once listening; Close
// it after the server.
type Peers struct {
	pool   *pgxpool.Pool // to the cluster database: two connections at most
	prefix string
	secret []byte // cluster_secret: signs block reads for the other replicas (replica.go)
	log    *slog.Logger

	// joined is set once the replica is registered in the cluster
	// database; until then it serves on its own (join).
	joined atomic.Bool
	stop   context.CancelFunc
	done   chan struct{} // closed when the joining goroutine returned

	mu     sync.Mutex
	urls   map[string]*url.URL  // prefix → base URL of the other replicas
	misses map[string]time.Time // prefixes not found, and when
	base   string               // the advertised URL, once known
	outage error                // why the replica is not in the cluster, until joined
}

// missTTL is how long a prefix no replica has stays unknown without
// asking the database again (ids made up by a client cost one query a
// prefix at most this often); maxMisses bounds how many are remembered.
const (
	missTTL   = 5 * time.Second
	maxMisses = 4096
)

// OpenPeers registers a new replica in the cluster database at dsn and
// returns it with its prefix. secret (cluster_secret, at least
// MinSecretBytes, the same on every replica) signs and checks the block
// reads replicas make on a caller's behalf; a signing key an older
// version recorded in the cluster database is deleted.
//
// A cluster database that does not answer is not an error: the replica
// then serves on its own — its ids carry its prefix already, nothing is
// forwarded to or from it — says so (Joined), and registers as soon as
// the database answers, retrying with backoff until Close.
func OpenPeers(ctx context.Context, dsn string, secret []byte, log *slog.Logger) (*Peers, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("cluster: cluster_secret is %d bytes: it must be at least %d (try: openssl rand -hex 32)", len(secret), MinSecretBytes)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("cluster: cluster_dsn: %w", err)
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.RuntimeParams["application_name"] = "lakegate cluster peers"
	pool, err := pgxpool.NewWithConfig(ctx, cfg) // connects lazily
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var b [PrefixLen / 2]byte
	_, _ = rand.Read(b[:])
	p := &Peers{pool: pool, prefix: hex.EncodeToString(b[:]), secret: bytes.Clone(secret), log: log,
		urls: map[string]*url.URL{}, misses: map[string]time.Time{}, done: make(chan struct{})}
	jctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = stop
	err = p.register(ctx)
	if errors.Is(err, errPrefixTaken) {
		// A prefix is 32 random bits: a clash is rare, and at start no id
		// carries it yet.
		for range 15 {
			_, _ = rand.Read(b[:])
			p.prefix = hex.EncodeToString(b[:])
			if err = p.register(ctx); !errors.Is(err, errPrefixTaken) {
				break
			}
		}
	}
	switch {
	case err == nil:
		close(p.done)
	case errors.Is(err, errPrefixTaken):
		stop()
		pool.Close()
		return nil, fmt.Errorf("cluster: register the replica: %w", err)
	default:
		p.failJoin(err)
		log.Warn("cluster: the cluster database does not answer: serving as a replica of its own until it does",
			"prefix", p.prefix, lakegate.LogError, err.Error())
		go p.join(jctx)
	}
	return p, nil
}

// errPrefixTaken: another replica registered this replica's prefix.
var errPrefixTaken = errors.New("no free replica prefix")

// register records this replica (prefix, and its URL once advertised) in
// the cluster database, making the tables first, and deletes a signing
// key an older version kept there.
func (p *Peers) register(ctx context.Context) error {
	p.mu.Lock()
	base := p.base
	p.mu.Unlock()
	err := p.exec(ctx, func(conn *pgx.Conn) error {
		if err := ensureSchema(ctx, conn); err != nil {
			return err
		}
		tag, err := conn.Exec(ctx, `DELETE FROM lakegate_cluster_state WHERE name = $1`, legacySecretRow)
		if err != nil {
			return err
		}
		if tag.RowsAffected() > 0 {
			p.log.Warn("cluster: deleted the signing key an older version kept in the cluster database; " +
				"replicas of that version can no longer read blocks of this one")
		}
		if base != "" {
			// A replica restarted at the same address leaves its old row.
			if _, err := conn.Exec(ctx, `DELETE FROM lakegate_cluster_replicas WHERE url = $1`, base); err != nil {
				return err
			}
		}
		_, err = conn.Exec(ctx, `INSERT INTO lakegate_cluster_replicas (prefix, url) VALUES ($1, NULLIF($2, ''))`, p.prefix, base)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
			return errPrefixTaken
		}
		return err
	})
	if err == nil {
		p.joined.Store(true)
	}
	return err
}

// joinBackoff is join's pause between attempts: a second doubled up to
// 30 s, with equal jitter.
var joinBackoff = backoff.Policy{Base: time.Second, Cap: 30 * time.Second}

// join registers the replica once the cluster database answers, trying
// again with backoff until it does or ctx ends. It logs the outage's
// cause when it changes, and the join.
func (p *Peers) join(ctx context.Context) {
	defer close(p.done)
	for attempt := 1; ; attempt++ {
		if !backoff.Wait(ctx, joinBackoff.Delay(attempt)) {
			return
		}
		err := p.register(ctx)
		switch {
		case err == nil:
			p.log.Info("cluster: the cluster database answers: this replica joined the cluster", "prefix", p.prefix)
			return
		case errors.Is(err, errPrefixTaken):
			p.failJoin(err)
			p.log.Error("cluster: another replica registered this replica's prefix meanwhile: restart this replica to join", "prefix", p.prefix)
			return
		case ctx.Err() != nil:
			return
		}
		if p.failJoin(err) {
			p.log.Warn("cluster: the cluster database still does not answer", lakegate.LogError, err.Error())
		}
	}
}

// failJoin records why the replica is not in the cluster, and reports
// whether the cause changed.
func (p *Peers) failJoin(err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := p.outage == nil || p.outage.Error() != err.Error()
	p.outage = err
	return changed
}

// Joined is nil once this replica is in the cluster; before, why it is
// not, in words safe to show (the log has the address).
func (p *Peers) Joined() error {
	if p.joined.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	why := "the cluster database does not answer"
	if errors.Is(p.outage, errPrefixTaken) {
		why = "another replica holds its prefix: restart it"
	}
	return &lakegate.Error{Kind: lakegate.KindUnavailable,
		Message: "this replica serves on its own, not in the cluster: " + why,
		Hint:    "it joins as soon as the cluster database (cluster_dsn) answers; meanwhile sessions and transfers of other replicas cannot be reached through it"}
}

// exec runs fn on a connection to the cluster database.
func (p *Peers) exec(ctx context.Context, fn func(*pgx.Conn) error) error {
	return p.pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return fn(c.Conn()) })
}

// Prefix is what this replica's ids begin with; "" for nil (no cluster).
func (p *Peers) Prefix() string {
	if p == nil {
		return ""
	}
	return p.prefix
}

// Interface is p as a host.Peers, nil when p is nil (no cluster).
func (p *Peers) Interface() host.Peers {
	if p == nil {
		return nil
	}
	return p
}

// Advertise records the URL the other replicas reach this one at: in
// the cluster database now, or when the replica joins.
func (p *Peers) Advertise(ctx context.Context, base string) error {
	if _, err := url.Parse(base); err != nil {
		return fmt.Errorf("cluster: advertised URL: %w", err)
	}
	p.mu.Lock()
	p.base = base
	p.mu.Unlock()
	if !p.joined.Load() {
		return nil // join writes it
	}
	err := p.exec(ctx, func(conn *pgx.Conn) error {
		// A replica restarted at the same address leaves its old row.
		_, err := conn.Exec(ctx, `DELETE FROM lakegate_cluster_replicas WHERE url = $1 AND prefix <> $2`, base, p.prefix)
		if err == nil {
			_, err = conn.Exec(ctx, `UPDATE lakegate_cluster_replicas SET url = $1 WHERE prefix = $2`, base, p.prefix)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("cluster: advertise %s: %w", base, err)
	}
	p.log.Info("cluster: replica registered", "prefix", p.prefix, "url", base)
	return nil
}

// owner is the base URL of the replica with prefix, or nil when it is
// unknown. A known one is remembered: its prefix is never reused while
// its row exists.
func (p *Peers) owner(ctx context.Context, prefix string) *url.URL {
	if !p.joined.Load() {
		return nil // the cluster database does not answer
	}
	p.mu.Lock()
	u, ok := p.urls[prefix]
	missed, recent := p.misses[prefix]
	p.mu.Unlock()
	if ok {
		return u
	}
	if recent && time.Since(missed) < missTTL {
		return nil
	}
	var raw *string
	err := p.exec(ctx, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT url FROM lakegate_cluster_replicas WHERE prefix = $1`, prefix).Scan(&raw)
	})
	if err == nil && raw != nil {
		u, err = url.Parse(*raw)
	}
	if err != nil || raw == nil {
		p.mu.Lock()
		if len(p.misses) >= maxMisses {
			clear(p.misses)
		}
		p.misses[prefix] = time.Now()
		p.mu.Unlock()
		return nil
	}
	p.mu.Lock()
	p.urls[prefix] = u
	p.mu.Unlock()
	return u
}

// Forward sends r, a request for the session or transfer id, to the
// replica that owns it, and reports whether it did. It does not when id
// is this replica's, when the owner is unknown, or when r was forwarded
// already: the caller then answers as for an unknown id. A request the
// owner cannot be reached for gets 503 unavailable, saying so.
func (p *Peers) Forward(w http.ResponseWriter, r *http.Request, id string) bool {
	if len(id) < PrefixLen || id[:PrefixLen] == p.prefix || r.Header.Get(ForwardedHeader) != "" {
		return false
	}
	target := p.owner(r.Context(), id[:PrefixLen])
	if target == nil {
		return false
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(ForwardedHeader, p.prefix)
		},
		FlushInterval: -1, // event streams pass at once
		ErrorLog:      slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() != nil {
			return // the client went away
		}
		p.log.Warn("cluster: forward to the owning replica failed", "owner", id[:PrefixLen], "url", target.String(), lakegate.LogError, err.Error())
		httperr.Write(w, &lakegate.Error{Kind: lakegate.KindUnavailable,
			Message: "the replica that holds this session or transfer does not answer",
			Hint:    "open a new session (or run the query again): sessions and transfers live on one replica", RetryAfter: time.Second, Err: err})
	}
	rp.ServeHTTP(w, r)
	return true
}

// Close removes this replica from the cluster's table and closes its
// connections. Call it once, after the server.
func (p *Peers) Close(ctx context.Context) error {
	defer p.pool.Close()
	p.stop()
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("cluster: close: %w", ctx.Err())
	}
	if !p.joined.Load() {
		return nil
	}
	return p.exec(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, `DELETE FROM lakegate_cluster_replicas WHERE prefix = $1`, p.prefix)
		return err
	})
}
