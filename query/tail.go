package query

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/backoff"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// Tail follows what arrives in a table. A tail request names the rows (a
// table, its filters) and where the caller is (a cursor): the answer is
// the rows after the cursor, in the table's growing order (its primary
// key, or the columns the request names), and the cursor after the last.
// The first call, without a cursor, answers the newest rows. With a wait
// and nothing new, the call waits until rows arrive or the wait ends.
//
// Waiters are woken, not polled: lakegate's own ingest wakes the waiters
// of its table in the process and, through PostgreSQL's NOTIFY in the
// ingest's own transaction, on every replica that listens (one
// connection per database, from the first wait on it). Rows written by other
// programs are found by a re-check: one query per table per TailRecheck
// (1 s) however many wait, the newest row of the table (its keys), run as
// the first waiter's role; a change wakes every waiter, who looks again
// with its own filters. Nothing is queried while nothing arrives but that
// re-check, which an operator can turn off.
//
// The keys of a tail's order must be NOT NULL. Rows come exactly once
// across retries (a cursor names a row, not a page) when the key grows in
// commit order: lakegate's own ingest into a table commits one batch at
// a time in PostgreSQL (a transaction-level advisory lock), so a serial
// key it takes is never passed by a commit behind it.

// TailRequest asks for the rows of a table after a cursor.
type TailRequest struct {
	Database string   `json:"database"`
	Table    string   `json:"table"`
	Columns  []Select `json:"columns,omitempty"`
	Filters  []Filter `json:"filters,omitempty"`
	// OrderBy are the columns of the growing order (NOT NULL); empty:
	// the primary key.
	OrderBy []string `json:"order_by,omitempty"`
	// Cursor is the last answer's NextCursor; empty: the newest rows.
	Cursor string `json:"cursor,omitempty"`
	// Limit caps the rows (0: the default).
	Limit int `json:"limit,omitempty"`
	// Wait is how long to wait for rows when there are none yet (at
	// most MaxTailWait).
	Wait time.Duration `json:"-"`
	// Admit, if set, is called around each look a waiting tail takes at
	// its table (a query), for the caller's share of the workers: a tail
	// holds none while it waits.
	Admit func(context.Context) (release func(), err error) `json:"-"`
}

// MaxTailWait bounds a tail's wait: under the minute MCP clients give a
// call, with room to spare.
const MaxTailWait = 25 * time.Second

// DefaultTailRecheck is how often the rows of a table someone waits on
// are looked for when lakegate's ingest did not say (Options.TailRecheck).
const DefaultTailRecheck = config.DefaultTailRecheck

// tailChannel is the PostgreSQL channel lakegate's ingest notifies, with
// the table's name.
const tailChannel = "lakegate_rows"

// PrepareTail prepares the tail r for c and, with r.Wait, waits until it
// has rows to answer or the wait ends (or ctx does). Its Run answers the
// rows and, always, the cursor after them (the same one when there are
// none).
func (e *Engine) PrepareTail(ctx context.Context, c lakegate.Caller, r TailRequest) (*Stmt, error) {
	if r.Wait < 0 || r.Wait > MaxTailWait {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("the wait must be 0 to %v", MaxTailWait)}
	}
	page := r
	page.Limit, page.Cursor, page.Admit = 0, "", nil
	p, err := e.prepare(ctx, c, r.Database, r.Table, r.Limit, r.Cursor, requestHash("tail", page))
	if err != nil {
		return nil, err
	}
	g, cat, src, limit, start, hash := p.g, p.cat, p.src, p.limit, p.start, p.hash
	req := Request{Table: r.Table, Columns: r.Columns, Filters: r.Filters}
	for _, o := range r.OrderBy {
		req.OrderBy = append(req.OrderBy, Order{Column: o})
	}
	b, err := sqlbuild.BuildAfter(src.dialect(), cat, req, normKeys(start.after))
	if err != nil {
		return nil, err
	}
	if b.Keys == nil {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("table %q has no primary key to follow", r.Table),
			Hint: "give order_by: NOT NULL columns that grow as rows arrive (an id, an ingest time)"}
	}
	for _, k := range b.Keys {
		if !k.NotNull {
			return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "a tail follows NOT NULL columns only",
				Hint: "give order_by: NOT NULL columns that grow as rows arrive (an id, an ingest time)"}
		}
	}
	if start.after == nil {
		b = b.Newest(limit)
	}
	s, err := e.builtStmt(g, src, r.Database, b, limit, start, hash)
	if err != nil {
		return nil, err
	}
	s.tail = true
	if r.Wait <= 0 {
		return s, nil
	}
	// A statement of one row: whether there is anything to answer yet.
	probe, err := e.builtStmt(g, src, r.Database, b, 1, start, "")
	if err != nil {
		return nil, err
	}
	probe.keys, probe.hidden = nil, b.Hidden
	// The table's newest row, without filters: the re-check, made by
	// the first waiter of a table.
	newest := func() (*Stmt, error) {
		nb, err := sqlbuild.Build(src.dialect(), cat, req)
		if err != nil {
			return nil, err
		}
		s, err := e.builtStmt(g, src, r.Database, nb.Newest(1), 1, pageStart{}, "recheck")
		if err != nil {
			return nil, err
		}
		s.tail = true // its cursor names the newest row by its keys
		return s, nil
	}
	look := func(ctx context.Context) (int, error) {
		if r.Admit != nil {
			release, err := r.Admit(ctx)
			if err != nil {
				return 0, err
			}
			defer release()
		}
		return countRows(ctx, probe)
	}
	return s, e.tails.await(ctx, e, tailKey{r.Database, r.Table}, r.Wait, look, newest)
}

// tailKey names a table waited on.
type tailKey struct{ db, table string }

// tailHub holds the tables someone waits on.
type tailHub struct {
	mu        sync.Mutex
	watches   map[tailKey]*tailWatch
	listening map[string]bool // databases whose NOTIFY a connection listens to
	heard     map[string]bool // databases whose listener is connected now
	// signals counts, by database and source, the signals that rows may
	// have arrived.
	signals map[[2]string]uint64
	// onRows, when set, hears of each signal first (the result cache).
	onRows func(db string)
}

// The sources of a wake: this process's ingest, another replica's (a
// NOTIFY), or a re-check that found the newest row changed.
const (
	wakeIngest  = "ingest"
	wakeNotify  = "notify"
	wakeRecheck = "recheck"
)

// TailStat is what the tails of one database are doing.
type TailStat struct {
	Database string
	// Waiters are the tails (and watch subscriptions) waiting now.
	Waiters int
	// Listening says that other replicas' ingests are heard now (a
	// PostgreSQL connection listens).
	Listening bool
	// Signals counts the signals that rows arrived, by source: ingest,
	// notify, recheck.
	Signals map[string]uint64
}

// TailStats lists, for each database, its waiting tails and the signals
// that woke them.
func (e *Engine) TailStats() []TailStat {
	h := &e.tails
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]TailStat, len(e.names))
	for i, db := range e.names {
		out[i] = TailStat{Database: db, Signals: map[string]uint64{}, Listening: h.heard[db]}
		for _, src := range []string{wakeIngest, wakeNotify, wakeRecheck} {
			out[i].Signals[src] = h.signals[[2]string{db, src}]
		}
		for k, w := range h.watches {
			if k.db == db {
				out[i].Waiters += w.waiters
			}
		}
	}
	return out
}

// tailWatch is one table's waiters: woken is closed (and replaced) when
// rows may have arrived.
type tailWatch struct {
	waiters int
	woken   chan struct{}
	stop    context.CancelFunc // the re-check
}

// wake wakes the waiters of db's table.
func (h *tailHub) wake(db, table, source string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.signals == nil {
		h.signals = map[[2]string]uint64{}
	}
	h.signals[[2]string{db, source}]++
	if h.onRows != nil && source != wakeRecheck {
		h.onRows(db)
	}
	if w := h.watches[tailKey{db, table}]; w != nil {
		close(w.woken)
		w.woken = make(chan struct{})
	}
}

// wakeAll wakes the waiters of every table of db.
func (h *tailHub) wakeAll(db string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.onRows != nil {
		h.onRows(db)
	}
	for k, w := range h.watches {
		if k.db == db {
			close(w.woken)
			w.woken = make(chan struct{})
		}
	}
}

// await waits until look finds a row, looking again each time the table
// is woken, until wait has passed or ctx ends. It returns nil then too:
// the caller's statement answers what there is.
func (h *tailHub) await(ctx context.Context, e *Engine, key tailKey, wait time.Duration, look func(context.Context) (int, error), newest func() (*Stmt, error)) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	woken, leave := h.enter(e, key, newest)
	defer leave()
	for {
		ch := woken() // before looking: a wake while looking is not lost
		n, err := look(ctx)
		if err != nil || n > 0 {
			if ctx.Err() != nil {
				return nil // the wait ended: answer what there is
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}

// enter counts a waiter on key, starting the table's re-check and its
// database's listener with the first; it returns the current wake channel
// (read anew each time round) and leave.
func (h *tailHub) enter(e *Engine, key tailKey, newest func() (*Stmt, error)) (woken func() <-chan struct{}, leave func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watches == nil {
		h.watches, h.listening = map[tailKey]*tailWatch{}, map[string]bool{}
	}
	w := h.watches[key]
	if w == nil {
		w = &tailWatch{woken: make(chan struct{})}
		h.watches[key] = w
		if every := e.opts.TailRecheck; every > 0 {
			if st := recheckStmt(newest, e.log); st != nil {
				ctx, stop := context.WithCancel(e.stopping)
				w.stop = stop
				e.watchers.Add(1)
				go func() {
					defer e.watchers.Done()
					h.recheck(ctx, key, every, st)
				}()
			}
		}
	}
	h.listenLocked(e, key.db)
	w.waiters++
	woken = func() <-chan struct{} {
		h.mu.Lock()
		defer h.mu.Unlock()
		return w.woken
	}
	return woken, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if w.waiters--; w.waiters == 0 {
			if w.stop != nil {
				w.stop()
			}
			delete(h.watches, key)
		}
	}
}

// listenTo starts, for a PostgreSQL database, the connection that hears
// other replicas' ingests (listen), once.
func (h *tailHub) listenTo(e *Engine, db string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listenLocked(e, db)
}

func (h *tailHub) listenLocked(e *Engine, db string) {
	if h.listening == nil {
		h.listening = map[string]bool{}
	}
	if h.listening[db] {
		return
	}
	if src, err := e.source(db); err == nil {
		if pg, ok := src.(*pgSource); ok {
			h.listening[db] = true
			e.watchers.Add(1)
			go func() {
				defer e.watchers.Done()
				h.listen(e.stopping, db, pg.pool, e.log)
			}()
		}
	}
}

// recheckStmt makes the re-check's statement; nil when it cannot (the
// waiters then wait on lakegate's ingest alone).
func recheckStmt(newest func() (*Stmt, error), log *slog.Logger) *Stmt {
	s, err := newest()
	if err != nil {
		log.Warn("a tail's re-check cannot be made", "error", err)
		return nil
	}
	return s
}

// recheck looks at the newest row of key's table every so often while
// someone waits on it, and wakes them when it changed: rows written by
// other programs than lakegate.
func (h *tailHub) recheck(ctx context.Context, key tailKey, every time.Duration, newest *Stmt) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last string
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := newest.Run(ctx, discardSink{})
		if err != nil {
			continue // a failing re-check waits for the next; ingest still wakes
		}
		// The first look wakes them too: a row may have come between
		// their own look and this one.
		if first || res.NextCursor != last {
			h.wake(key.db, key.table, wakeRecheck)
		}
		last, first = res.NextCursor, false
	}
}

// listen wakes the waiters of db's tables that lakegate's ingest, on any
// replica, notifies, for as long as the engine runs: one connection of
// db's pool, taken again after a failure.
func (h *tailHub) listen(ctx context.Context, db string, pool *pgxpool.Pool, log *slog.Logger) {
	pause := backoff.Policy{Base: 100 * time.Millisecond, Cap: 10 * time.Second}
	for attempt := 1; ctx.Err() == nil; attempt++ {
		err := h.listenOnce(ctx, db, pool, func() { attempt = 1 })
		if ctx.Err() != nil {
			return
		}
		log.Warn("tail listener lost its connection", "database", db, "error", err)
		if !backoff.Wait(ctx, pause.Delay(attempt)) {
			return
		}
	}
}

func (h *tailHub) listenOnce(ctx context.Context, db string, pool *pgxpool.Pool, listening func()) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection has session state (LISTEN): it is closed, not
	// returned to the pool.
	defer conn.Release()
	defer conn.Conn().Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+tailChannel); err != nil {
		return err
	}
	listening()
	h.hear(db, true)
	defer h.hear(db, false)
	// Rows that came before the LISTEN took hold were told to no one:
	// the waiters look again.
	h.wakeAll(db)
	// The wait ends with ctx by its socket's deadline: a CancelRequest
	// (what the pool's connections do) stops nothing on an idle
	// connection, and would hold Close for its whole grace.
	pc := conn.Conn().PgConn()
	stop := context.AfterFunc(ctx, func() { _ = pc.Conn().SetDeadline(time.Now()) })
	defer stop()
	for {
		n, err := conn.Conn().WaitForNotification(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		h.wake(db, n.Payload, wakeNotify)
	}
}

func (h *tailHub) hear(db string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.heard == nil {
		h.heard = map[string]bool{}
	}
	h.heard[db] = on
}

// countRows runs s (a statement of at most one row) and counts its rows.
func countRows(ctx context.Context, s *Stmt) (int, error) {
	res, err := s.Run(ctx, discardSink{})
	if err != nil {
		return 0, err
	}
	return res.RowCount, nil
}

// discardSink takes rows and keeps none.
type discardSink struct{}

func (discardSink) Begin([]ResultColumn) error { return nil }
func (discardSink) Row([]Cell) error           { return nil }
func (discardSink) End(*Result) error          { return nil }

// tailPatience bounds how long a tail waits for its turn when its subject
// already runs as many queries as it may: its looks, and its answer, come
// when one of them ends.
const tailPatience = 10 * time.Second

// Patient is admit retried while it answers rate_limited (the subject's
// queries at once), for up to tailPatience and not past ctx: tails woken
// together look in turn instead of failing.
func Patient(admit func(context.Context) (func(), error)) func(context.Context) (func(), error) {
	return func(ctx context.Context) (func(), error) {
		deadline := time.Now().Add(tailPatience)
		pause := backoff.Policy{Base: 20 * time.Millisecond, Cap: 500 * time.Millisecond}
		for attempt := 1; ; attempt++ {
			release, err := admit(ctx)
			if lakegate.KindOf(err) != lakegate.KindRateLimited || time.Now().After(deadline) {
				return release, err
			}
			if !backoff.Wait(ctx, pause.Delay(attempt)) {
				return nil, err
			}
		}
	}
}
