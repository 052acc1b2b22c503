package query

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/suggest"
	"github.com/lakegate/lakegate/query/internal/names"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// Defaults of Options: the settings' defaults, declared once in config.
const (
	DefaultStatementTimeout = config.DefaultStatementTimeout
	DefaultLimit            = config.DefaultRowLimit
	DefaultMaxLimit         = config.DefaultMaxRowLimit
	DefaultMaxRowBytes      = config.DefaultMaxRowBytes
	DefaultAcquireWait      = config.DefaultWorkerWait
)

// connectTimeout bounds the first attempt to connect every database in
// Open, so that a database whose host drops packets delays start by no
// more (it is served once its watcher connects), and each attempt of a
// watcher (or the statement timeout, if longer).
const connectTimeout = 10 * time.Second

// Log keys used by the engine.
const (
	logKeyDatabase = "database"
	logKeyDriver   = "driver"
)

// source is one connected database: a PostgreSQL pool or an SQLite file.
// Implementations are safe for concurrent use.
type source interface {
	dialect() Dialect
	ping(ctx context.Context) error
	// loadCatalog reads every table with its columns and keys.
	loadCatalog(ctx context.Context) ([]*tableInfo, error)
	// run runs s read-only and streams at most s.Limit rows into sink
	// (Begin and Row; Stmt.Run calls End). Begin comes after the first
	// row was read.
	run(ctx context.Context, s *Stmt, sink Sink) (*Result, error)
	// estimate returns the planner's row count and row width (bytes) for
	// s, or errNoEstimate.
	estimate(ctx context.Context, s *Stmt) (rows, width float64, err error)
	// insert writes the groups of rows (already converted for the
	// dialect) in one transaction and returns the count after commit.
	// With a key k, the key is claimed in the same transaction, and a
	// batch committed before under k is replayed, not written again.
	// The batch's parts of t's rollups that exist are added in the same
	// transaction.
	insert(ctx context.Context, t *tableInfo, groups []insertGroup, k *batchKey, rollups []rollupBatch) (InsertResult, error)
	// buildRollup makes and fills rollup r of t, readable by the roles
	// among roles that may read t; it returns the rollup's row count.
	buildRollup(ctx context.Context, t *tableInfo, r *sqlbuild.Rollup, roles []string) (int64, error)
	// readableRollups reports, by table name, which of t's rollups rs
	// exist and role ("": the connecting user) may read.
	readableRollups(ctx context.Context, t *tableInfo, rs []*sqlbuild.Rollup, role string) (map[string]bool, error)
	// close releases the connections; it is called once.
	close() error
}

// Engine serves the configured databases: it owns their connections and
// catalogs. An Engine is safe for concurrent use. Whoever calls [Open]
// owns the Engine and closes it ([Engine.Close]), after every value built
// on it (a server, an MCP plugin) is closed.
type Engine struct {
	opts    Options
	log     *slog.Logger
	names   []string // sorted
	sources map[string]source
	// opened lists the sources in the order Open connected them; Close
	// releases them in reverse.
	opened []source
	// catalogs caches each database's catalog; the map itself is fixed
	// after Open, each entry has its own lock.
	catalogs map[string]*catalogCache
	// breakers holds each database's circuit breaker; gates whether it
	// is served yet (outage.go). Both fixed after Open.
	breakers map[string]*breaker
	gates    map[string]*gate
	// stopping ends when Close begins: the watchers of databases not
	// served yet return, and Close waits for them.
	stopping context.Context
	stop     context.CancelFunc
	watchers sync.WaitGroup
	plans    planCache
	// now, when set, is the clock of idempotency keys (tests move it);
	// nil: time.Now.
	now func() time.Time
	// acceptAll, set by tests only, lets every statement past the
	// validator, to show that the database's own privileges still hold.
	acceptAll bool

	// tails are the tables tails wait on (tail.go).
	tails tailHub
	// rollupConfigs are each database's rollups (fixed after Open), and
	// rollups what is known of them (rollup.go).
	rollupConfigs map[string][]config.Rollup
	rollups       rollupState
	// cache is the result cache; nil: off (cache.go).
	cache *resultCache
	// checked remembers the statements the validator accepted (checked.go).
	checked checkedCache

	closeOnce sync.Once
	released  chan struct{} // closed once Close has released every source
	closeErr  error         // set before released is closed
}

// Open opens every database of dbs (a pgx pool for PostgreSQL, read-only
// handles for SQLite), pings it and, for PostgreSQL, checks the roles
// callers' SQL runs as. A PostgreSQL database that does not answer is not
// an error: it is served once it does (outage.go). A setting that is
// wrong, an SQLite file that cannot be opened, or a privileged role is:
// Open then releases what it had opened and returns an error naming the
// database (never its password). A nil opts means the defaults.
func Open(ctx context.Context, dbs []config.Database, opts *Options) (*Engine, error) {
	e := &Engine{
		sources:  make(map[string]source, len(dbs)),
		catalogs: make(map[string]*catalogCache, len(dbs)),
		breakers: make(map[string]*breaker, len(dbs)),
		gates:    make(map[string]*gate, len(dbs)),
	}
	e.stopping, e.stop = context.WithCancel(context.WithoutCancel(ctx))
	if opts != nil {
		e.opts = *opts
	}
	if e.opts.StatementTimeout <= 0 {
		e.opts.StatementTimeout = DefaultStatementTimeout
	}
	if e.opts.DefaultLimit <= 0 {
		e.opts.DefaultLimit = DefaultLimit
	}
	if e.opts.MaxLimit <= 0 {
		e.opts.MaxLimit = DefaultMaxLimit
	}
	if len(e.opts.CursorKey) == 0 {
		e.opts.CursorKey = newCursorKey()
	}
	if e.opts.DefaultLimit > e.opts.MaxLimit {
		e.opts.DefaultLimit = e.opts.MaxLimit
	}
	if e.opts.AcquireWait <= 0 {
		e.opts.AcquireWait = DefaultAcquireWait
	}
	if e.opts.MaxRowBytes <= 0 {
		e.opts.MaxRowBytes = DefaultMaxRowBytes
	}
	if e.opts.RetryAttempts <= 0 {
		e.opts.RetryAttempts = DefaultRetryAttempts
	}
	if e.opts.BreakerFailures <= 0 {
		e.opts.BreakerFailures = DefaultBreakerFailures
	}
	if e.opts.BreakerCooldown <= 0 {
		e.opts.BreakerCooldown = DefaultBreakerCooldown
	}
	if e.opts.KeyTTL <= 0 {
		e.opts.KeyTTL = DefaultKeyTTL
	}
	if e.opts.TailRecheck == 0 {
		e.opts.TailRecheck = DefaultTailRecheck
	}
	switch e.opts.ServerInfoFunctions {
	case "":
		e.opts.ServerInfoFunctions = config.ServerInfoAdmin
	case config.ServerInfoAdmin, config.ServerInfoAll, config.ServerInfoNone:
	default:
		return nil, lakegate.Errorf(lakegate.KindValidation, "server_info_functions %q: want %s, %s or %s", e.opts.ServerInfoFunctions,
			config.ServerInfoAdmin, config.ServerInfoAll, config.ServerInfoNone)
	}
	e.cache = newResultCache(e.opts.ResultCacheTTL, e.opts.ResultCacheBytes)
	e.tails.onRows = e.cache.forget
	e.log = e.opts.Logger
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if len(dbs) == 0 {
		return nil, lakegate.Errorf(lakegate.KindValidation, "no database configured")
	}
	for _, db := range dbs {
		if err := e.openOne(ctx, db); err != nil {
			e.abandon(ctx)
			return nil, err
		}
	}
	sort.Strings(e.names)
	if err := e.checkAccess(); err != nil {
		e.abandon(ctx)
		return nil, err
	}
	// Every database is tried at once, so that start waits for the
	// slowest, not for the sum, and for connectTimeout at most.
	gctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Go(func() { errs[i] = e.admit(gctx, db.Name, db.ReadURLs) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.abandon(ctx)
		return nil, err
	}
	if e.cache != nil {
		// Other replicas' ingests empty this one's entries too.
		for _, db := range e.names {
			e.tails.listenTo(e, db)
		}
	}
	return e, nil
}

// abandon releases what a failed Open connected, before Open returns (even
// when ctx was cancelled); the error of Open is the one that matters.
func (e *Engine) abandon(ctx context.Context) {
	_ = e.Close(context.WithoutCancel(ctx))
}

func (e *Engine) openOne(ctx context.Context, db config.Database) error {
	if db.Name == "" {
		return lakegate.Errorf(lakegate.KindValidation, "a database has no name")
	}
	if _, dup := e.sources[db.Name]; dup {
		return lakegate.Errorf(lakegate.KindValidation, "database %q is configured twice", db.Name)
	}
	var (
		src source
		err error
	)
	switch db.Driver() {
	case "sqlite":
		sctx, cancel := context.WithTimeout(ctx, max(e.opts.StatementTimeout, connectTimeout))
		defer cancel()
		src, err = openSQLite(sctx, db.Name, db.SQLitePath(), e.opts.MaxRowBytes)
	default:
		src, err = openPostgres(db.Name, db.URL, db.ReadURLs, &e.opts)
	}
	if err != nil {
		return err
	}
	e.sources[db.Name] = src
	e.opened = append(e.opened, src)
	e.catalogs[db.Name] = &catalogCache{}
	e.breakers[db.Name] = newBreaker(e.opts.BreakerFailures, e.opts.BreakerCooldown)
	e.gates[db.Name] = &gate{}
	e.names = append(e.names, db.Name)
	if len(db.Rollups) > 0 {
		if e.rollupConfigs == nil {
			e.rollupConfigs = map[string][]config.Rollup{}
		}
		e.rollupConfigs[db.Name] = db.Rollups
	}
	e.log.Info("database opened", logKeyDatabase, db.Name, logKeyDriver, db.Driver())
	return nil
}

// Close releases the databases' connections, the last opened first, and
// waits until they are closed (a PostgreSQL pool waits for the connections
// in use to come back) or ctx ends, whichever is first; then it returns
// ctx's error, and the release goes on. Its owner calls it once nothing
// runs queries any more. It is idempotent: a later call waits for the same
// release within its own ctx and returns the same error.
func (e *Engine) Close(ctx context.Context) error {
	e.closeOnce.Do(func() {
		e.released = make(chan struct{})
		if e.stop != nil {
			e.stop()
		}
		go func() {
			defer close(e.released)
			e.watchers.Wait()
			errs := make([]error, 0, len(e.opened))
			for i := len(e.opened) - 1; i >= 0; i-- {
				errs = append(errs, e.opened[i].close())
			}
			e.closeErr = errors.Join(errs...)
		}()
	})
	select {
	case <-e.released:
		return e.closeErr
	default:
	}
	select {
	case <-e.released:
		return e.closeErr
	case <-ctx.Done():
		return fmt.Errorf("query: close: %w", ctx.Err())
	}
}

// Databases lists the configured databases, sorted by name.
func (e *Engine) Databases() []Database {
	out := make([]Database, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, Database{Name: n, Dialect: e.sources[n].dialect()})
	}
	return out
}

// Ping checks that every database is reachable; the error names the first
// that is not.
func (e *Engine) Ping(ctx context.Context) error {
	for _, n := range e.names {
		if err := e.pingOne(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// pingOne pings database n; a failure that is not a timeout means the
// database is unavailable. One not served yet answers why, unpinged: its
// watcher is at it.
func (e *Engine) pingOne(ctx context.Context, n string) error {
	if err := e.gates[n].refusal(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.StatementTimeout)
	defer cancel()
	err := e.sources[n].ping(ctx)
	if err == nil {
		return nil
	}
	if c := classify(ctx, n, err); lakegate.KindOf(c) == lakegate.KindTimeout {
		return c
	}
	return unavailable(n, err)
}

// source returns the named database or a not_found error listing the
// known ones.
func (e *Engine) source(db string) (source, error) {
	if s, ok := e.sources[db]; ok {
		if err := e.gates[db].refusal(); err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, &lakegate.Error{
		Kind:    lakegate.KindNotFound,
		Message: fmt.Sprintf("unknown database %q", db),
		Hint:    names.Hint("databases", db, e.names),
	}
}

// Tables lists the tables and views of database db (without columns) that
// c may read.
func (e *Engine) Tables(ctx context.Context, c lakegate.Caller, db string) ([]Table, error) {
	g, err := e.grantFor(c, db)
	if err != nil {
		return nil, err
	}
	cat, _, err := e.catalog(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]Table, 0, len(cat.tables))
	for _, t := range cat.tables {
		if !g.allows(t) {
			continue
		}
		tt := t.Table
		tt.Columns, tt.PrimaryKey, tt.ForeignKeys = nil, nil, nil
		out = append(out, tt)
	}
	return out, nil
}

// Describe returns one table of database db with its columns, primary key,
// foreign keys and row estimate. The result is the caller's to keep.
func (e *Engine) Describe(ctx context.Context, c lakegate.Caller, db, table string) (*Table, error) {
	g, err := e.grantFor(c, db)
	if err != nil {
		return nil, err
	}
	cat, _, err := e.catalog(ctx, db)
	if err != nil {
		return nil, err
	}
	t, err := g.table(cat, table)
	if err != nil {
		return nil, err
	}
	out := t.Table
	out.Columns = slices.Clone(out.Columns)
	out.PrimaryKey = slices.Clone(out.PrimaryKey)
	// Keys to tables the caller may not read are left out.
	out.ForeignKeys = slices.DeleteFunc(slices.Clone(out.ForeignKeys), func(fk ForeignKey) bool {
		ref, ok := cat.byName[fk.RefTable]
		return ok && !g.allows(ref)
	})
	return &out, nil
}

// DidYouMean is `did you mean "x" or "y"?` with up to 3 names of known
// close to name (a typo or two away, ignoring case; the closest first),
// or empty when none is. Every unknown name a caller gets a hint for goes
// through it: structured requests, the database's own errors (an unknown
// table, column or function in caller-written SQL), and the MCP plugin's
// unknown tools.
func DidYouMean(name string, known []string) string { return suggest.DidYouMean(name, known) }
