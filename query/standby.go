package query

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Standbys: a PostgreSQL database may name read replicas (hot standbys of
// its primary, fed by streaming replication). Reads (queries, catalog,
// plans) go to a healthy standby, in turn; ingest and idempotency keys
// always to the primary. A standby is healthy when it answered its last
// check (one a second) and its replay lag is within Options.MaxStandbyLag;
// otherwise, or while none is healthy, the primary serves the reads.

// standbyCheck asks a standby whether it is one and how far behind it is:
// zero when it has replayed all it received (or it was promoted), else
// the age of its last replayed transaction, which is also what a standby
// that does not stream yet (just restarted) is taken to lag by.
const standbyCheck = `SELECT pg_is_in_recovery(),
	CASE WHEN NOT pg_is_in_recovery() THEN 0
	WHEN pg_last_wal_receive_lsn() IS NOT NULL AND pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() THEN 0
	ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0) END::float8`

// Defaults of the standby options.
const (
	DefaultMaxStandbyLag = 10 * time.Second
	defaultStandbyCheck  = time.Second
	standbyCheckTimeout  = 2 * time.Second
)

// StandbyState is a standby's state: ok, lagging (past the lag bound) or
// down (no answer).
type StandbyState string

// The states of a standby.
const (
	StandbyOK      StandbyState = "ok"
	StandbyLagging StandbyState = "lagging"
	StandbyDown    StandbyState = "down"
)

// StandbyStats describes one standby for /ready and /metrics.
type StandbyStats struct {
	Database string `json:"database"`
	// Standby is its host:port (never its user or password).
	Standby string        `json:"standby"`
	State   StandbyState  `json:"state"`
	Lag     time.Duration `json:"-"`
	LagS    float64       `json:"lag_s"`
	Error   string        `json:"error,omitempty"`
	Reads   int64         `json:"reads"`
}

type standby struct {
	addr  string
	pool  *pgxpool.Pool
	reads atomic.Int64

	mu    sync.Mutex
	state StandbyState
	lag   time.Duration
	err   string
}

type standbys struct {
	list   []*standby
	maxLag time.Duration
	next   atomic.Uint32
	stop   chan struct{}
	done   chan struct{}
}

// openStandbys makes the pools of database name's standbys and starts
// their checks; nil when there are none.
func openStandbys(name string, urls []string, o *Options) (*standbys, error) {
	if len(urls) == 0 {
		return nil, nil
	}
	ss := &standbys{maxLag: o.MaxStandbyLag, stop: make(chan struct{}), done: make(chan struct{})}
	if ss.maxLag <= 0 {
		ss.maxLag = DefaultMaxStandbyLag
	}
	for i, raw := range urls {
		cfg, err := poolConfig(fmt.Sprintf("%s (standby %d)", name, i+1), raw, o)
		if err != nil {
			ss.closePools()
			return nil, err
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
		if err != nil {
			ss.closePools()
			return nil, connectErr(name, cfg.ConnConfig.Password, err)
		}
		addr := raw
		if u, err := url.Parse(raw); err == nil {
			addr = u.Host
		}
		ss.list = append(ss.list, &standby{addr: addr, pool: pool, state: StandbyDown, err: "not checked yet"})
	}
	ss.checkAll()
	go ss.loop()
	return ss, nil
}

// pick is the standby a read should use, in turn among the healthy ones;
// nil for a write, or when none is healthy (the primary then reads).
func (ss *standbys) pick(write bool) *standby {
	if ss == nil || write {
		return nil
	}
	n := uint32(len(ss.list))
	start := ss.next.Add(1)
	for i := range n {
		sb := ss.list[(start+i)%n]
		sb.mu.Lock()
		ok := sb.state == StandbyOK
		sb.mu.Unlock()
		if ok {
			return sb
		}
	}
	return nil
}

// down marks sb down after a failed read; its next check may bring it
// back.
func (sb *standby) down(err error) {
	sb.mu.Lock()
	sb.state, sb.err = StandbyDown, err.Error()
	sb.mu.Unlock()
}

func (ss *standbys) loop() {
	defer close(ss.done)
	t := time.NewTicker(defaultStandbyCheck)
	defer t.Stop()
	for {
		select {
		case <-ss.stop:
			return
		case <-t.C:
			ss.checkAll()
		}
	}
}

func (ss *standbys) checkAll() {
	for _, sb := range ss.list {
		ss.check(sb)
	}
}

// check asks sb for its recovery state and lag.
func (ss *standbys) check(sb *standby) {
	ctx, cancel := context.WithTimeout(context.Background(), standbyCheckTimeout)
	defer cancel()
	var recovering bool
	var lagS float64
	err := sb.pool.QueryRow(ctx, standbyCheck).Scan(&recovering, &lagS)
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch {
	case err != nil:
		sb.state, sb.err = StandbyDown, err.Error()
	case time.Duration(lagS*float64(time.Second)) > ss.maxLag:
		sb.state, sb.err = StandbyLagging, fmt.Sprintf("replay lag %.1fs is past the bound of %s", lagS, ss.maxLag)
	default:
		// A standby promoted to primary (not in recovery) still answers
		// reads with current data.
		sb.state, sb.err = StandbyOK, ""
	}
	sb.lag = time.Duration(lagS * float64(time.Second))
}

// stats describes each standby.
func (ss *standbys) stats(database string) []StandbyStats {
	if ss == nil {
		return nil
	}
	out := make([]StandbyStats, 0, len(ss.list))
	for _, sb := range ss.list {
		sb.mu.Lock()
		out = append(out, StandbyStats{Database: database, Standby: sb.addr, State: sb.state, Lag: sb.lag,
			LagS: sb.lag.Seconds(), Error: sb.err, Reads: sb.reads.Load()})
		sb.mu.Unlock()
	}
	return out
}

func (ss *standbys) close() {
	if ss == nil {
		return
	}
	close(ss.stop)
	<-ss.done
	ss.closePools()
}

func (ss *standbys) closePools() {
	for _, sb := range ss.list {
		sb.pool.Close()
	}
}

// StandbyStats reports every standby of every PostgreSQL database, by
// database name.
func (e *Engine) StandbyStats() []StandbyStats {
	var out []StandbyStats
	for _, n := range e.names {
		if pg, ok := e.sources[n].(*pgSource); ok {
			out = append(out, pg.standbys.stats(n)...)
		}
	}
	return out
}
