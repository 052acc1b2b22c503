package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/host"
)

// workClass is who asks for a worker.
type workClass int

const (
	workREST workClass = iota
	workIngest
	workMCP
	numWorkClasses
)

var workClassNames = [numWorkClasses]string{"rest", "ingest", "mcp"}

func (w workClass) String() string { return workClassNames[w] }

// The limits whose rejections are counted, as metric label values.
const (
	limitRequests = "requests" // requests per second per subject
	limitQueries  = "queries"  // concurrent queries per subject
	limitSessions = "sessions" // MCP sessions
)

// maxSubjects bounds the per-subject state kept; past it, idle subjects
// are forgotten even before their token bucket has refilled.
const maxSubjects = 10000

// sweepEvery is how often idle subjects are looked for.
const sweepEvery = time.Minute

// Limits holds the worker pool shared by REST, ingest and MCP tool calls,
// and the per-subject limits: requests per second (one token bucket per
// subject, shared by REST requests and tool calls) and concurrent
// queries. Build it with NewLimits, give Limits.MCP() to the plugin
// (mcp.Options.Workers) and the Limits to New (Options.Limits), so that
// all of them draw from the same pool. It is safe for concurrent use and
// starts no goroutine.
type Limits struct {
	metrics *Metrics
	now     func() time.Time

	all, mcp chan struct{} // slots: the whole pool, and MCP's share of it
	wait     time.Duration
	inUse    [numWorkClasses]atomic.Int64
	waiting  [numWorkClasses]atomic.Int64

	rps        rate.Limit // 0: no rate limit
	burst      int
	maxQueries int // 0: no limit

	mu        sync.Mutex
	subjects  map[string]*subjectState
	lastSweep time.Time
}

// subjectState is one subject's bucket and running queries, under Limits.mu.
type subjectState struct {
	limiter *rate.Limiter // nil without a rate limit
	running int
}

// NewLimits builds the pool and limits of cfg (max_workers,
// mcp_max_workers, worker_wait, rate_limit_rps, rate_limit_burst,
// max_queries_per_subject). Rejections and query times go to m; nil
// keeps them nowhere.
func NewLimits(cfg config.Config, m *Metrics) *Limits {
	if m == nil {
		m = NewMetrics()
	}
	all := max(cfg.MaxWorkers, 1)
	return &Limits{
		metrics:    m,
		now:        time.Now,
		all:        make(chan struct{}, all),
		mcp:        make(chan struct{}, min(max(cfg.MCPMaxWorkers, 1), all)),
		wait:       max(time.Duration(cfg.WorkerWait), time.Millisecond),
		rps:        rate.Limit(cfg.RateLimitRPS),
		burst:      max(cfg.RateLimitBurst, 1),
		maxQueries: cfg.MaxQueriesPerSubject,
		subjects:   map[string]*subjectState{},
	}
}

// MCP is the plugin's view of the limits: each tool call takes a token of
// its subject's bucket, one of its concurrent queries and a slot of MCP's
// share of the pool.
func (l *Limits) MCP() host.Workers { return mcpWorkers{l} }

type mcpWorkers struct{ l *Limits }

var _ host.Workers = mcpWorkers{}

func (w mcpWorkers) Acquire(ctx context.Context) (func(), error) {
	caller, _ := lakegate.CallerFrom(ctx)
	if !host.Paid(ctx) {
		if err := w.l.allow(caller.Subject); err != nil {
			return nil, err
		}
	}
	return w.l.admit(ctx, caller.Subject, workMCP)
}

func (w mcpWorkers) Use() host.WorkerStatus {
	return host.WorkerStatus{
		Max:       cap(w.l.mcp),
		InUse:     int(w.l.inUse[workMCP].Load()),
		Waiting:   int(w.l.waiting[workMCP].Load()),
		PoolMax:   cap(w.l.all),
		PoolInUse: len(w.l.all),
	}
}

// allow takes one token of subject's bucket, or answers rate_limited with
// the time until the next token.
func (l *Limits) allow(subject string) error {
	if l.rps <= 0 || subject == "" {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	lim := l.subjectLocked(subject, now).limiter
	ok := lim.AllowN(now, 1)
	var wait time.Duration
	if !ok {
		wait = time.Duration((1 - lim.TokensAt(now)) / float64(l.rps) * float64(time.Second))
	}
	l.mu.Unlock()
	if ok {
		return nil
	}
	l.metrics.rateLimited.WithLabelValues(limitRequests).Inc()
	return &lakegate.Error{Kind: lakegate.KindRateLimited,
		Message:    fmt.Sprintf("too many requests for this subject: the limit is %g per second (burst %d)", float64(l.rps), l.burst),
		Hint:       "slow down and retry after retry_after seconds",
		RetryAfter: max(wait, time.Millisecond)}
}

// admit takes one of subject's concurrent queries and a worker slot of
// class, and returns their release (safe to call more than once).
func (l *Limits) admit(ctx context.Context, subject string, class workClass) (func(), error) {
	end, err := l.begin(subject)
	if err != nil {
		return nil, err
	}
	release, err := l.acquire(ctx, class)
	if err != nil {
		end()
		return nil, err
	}
	return func() { release(); end() }, nil
}

// begin counts one running query of subject, or answers rate_limited when
// it already runs max_queries_per_subject.
func (l *Limits) begin(subject string) (end func(), err error) {
	if l.maxQueries <= 0 || subject == "" {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.subjectLocked(subject, l.now())
	if st.running >= l.maxQueries {
		l.metrics.rateLimited.WithLabelValues(limitQueries).Inc()
		return nil, &lakegate.Error{Kind: lakegate.KindRateLimited,
			Message:    fmt.Sprintf("this subject already runs %d queries at once (max_queries_per_subject)", l.maxQueries),
			Hint:       "wait for a running query to finish",
			RetryAfter: time.Second}
	}
	st.running++
	return sync.OnceFunc(func() {
		l.mu.Lock()
		st.running--
		l.mu.Unlock()
	}), nil
}

// acquire waits at most worker_wait for a slot of the pool (MCP first for
// a slot of its share, then of the pool) and returns its release.
func (l *Limits) acquire(ctx context.Context, class workClass) (func(), error) {
	slots := []chan struct{}{l.all}
	if class == workMCP {
		slots = []chan struct{}{l.mcp, l.all}
	}
	free := func(held []chan struct{}) {
		for _, ch := range held {
			<-ch
		}
	}
	l.waiting[class].Add(1)
	timer := time.NewTimer(l.wait)
	defer func() {
		timer.Stop()
		l.waiting[class].Add(-1)
	}()
	for i, ch := range slots {
		select {
		case ch <- struct{}{}: // a free slot is taken at once, whatever ctx
			continue
		default:
		}
		select {
		case ch <- struct{}{}:
		case <-ctx.Done():
			free(slots[:i])
			return nil, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the request ended while waiting for a worker", Err: ctx.Err()}
		case <-timer.C:
			free(slots[:i])
			l.metrics.workerTimeouts.WithLabelValues(class.String()).Inc()
			return nil, l.busy(class, i == 0)
		}
	}
	l.inUse[class].Add(1)
	start := time.Now()
	return sync.OnceFunc(func() {
		free(slots)
		l.inUse[class].Add(-1)
		l.metrics.queryDuration.WithLabelValues(class.String()).Observe(time.Since(start).Seconds())
	}), nil
}

func (l *Limits) busy(class workClass, share bool) error {
	msg := fmt.Sprintf("all %d database workers are busy (waited %s)", cap(l.all), l.wait)
	if class == workMCP && share {
		msg = fmt.Sprintf("all %d MCP workers are busy (waited %s)", cap(l.mcp), l.wait)
	}
	return &lakegate.Error{Kind: lakegate.KindUnavailable, Message: msg, Hint: "retry after retry_after seconds", RetryAfter: time.Second}
}

// subjectLocked returns subject's state, made on first use; now and then
// it forgets idle subjects. l.mu is held.
func (l *Limits) subjectLocked(subject string, now time.Time) *subjectState {
	st := l.subjects[subject]
	if st != nil {
		return st
	}
	if len(l.subjects) >= maxSubjects || now.Sub(l.lastSweep) >= sweepEvery {
		l.sweepLocked(now)
	}
	st = &subjectState{}
	if l.rps > 0 {
		st.limiter = rate.NewLimiter(l.rps, l.burst)
	}
	l.subjects[subject] = st
	return st
}

// sweepLocked forgets the subjects that run nothing and whose bucket is
// full again: a new state for them would be the same. If that is not
// enough to get under maxSubjects, it forgets idle subjects down to three
// quarters of it. l.mu is held.
func (l *Limits) sweepLocked(now time.Time) {
	l.lastSweep = now
	for s, st := range l.subjects {
		if st.running == 0 && (st.limiter == nil || st.limiter.TokensAt(now) >= float64(l.burst)) {
			delete(l.subjects, s)
		}
	}
	for s, st := range l.subjects {
		if len(l.subjects) < maxSubjects*3/4 {
			break
		}
		if st.running == 0 {
			delete(l.subjects, s)
		}
	}
}

// rateLimit takes one of the caller's request tokens. The host runs it on
// its own routes; the plugin on those of its routes that are requests of
// their own (a transfer's manifest and /all), as Mount's meter: tool
// calls take their token in the plugin, and one block read takes none, as
// over resources/read (the call that made the transfer took its token, and
// reading it block by block costs no more than /all does).
func (s *Server) rateLimit(c *gin.Context) {
	if err := s.limits.allow(caller(c).Subject); err != nil {
		fail(c, err)
	}
}

// work holds one of the caller's concurrent queries and a worker slot of
// class while the rest of the chain runs, and counts the rows (set by the
// handler under rowsKey) and bytes returned.
func (s *Server) work(class workClass) gin.HandlerFunc {
	return func(c *gin.Context) {
		// The body is read before a slot is taken, within read_timeout,
		// so that a slow upload cannot hold a worker.
		if err := readBody(c, time.Duration(s.cfg.ReadTimeout)); err != nil {
			fail(c, err)
			return
		}
		release, err := s.limits.admit(c.Request.Context(), caller(c).Subject, class)
		if err != nil {
			fail(c, err)
			return
		}
		defer release()
		c.Next()
		if class == workREST && c.Writer.Status() < 300 {
			s.metrics.returned(class, int64(c.GetInt(rowsKey)), int64(max(c.Writer.Size(), 0)))
		}
	}
}

// rowsKey is where a handler leaves the row count of its result.
const rowsKey = "lakegate.rows"

// setupLimits takes the Metrics and Limits of the options, or makes them,
// and registers the values read at scrape time.
func (s *Server) setupLimits() error {
	s.metrics, s.limits = s.opts.Metrics, s.opts.Limits
	if s.metrics == nil {
		s.metrics = NewMetrics()
	}
	if s.limits == nil {
		s.limits = NewLimits(s.cfg, s.metrics)
	}
	if err := s.metrics.reg.Register(stateCollector{s}); err != nil {
		return fmt.Errorf("metrics: %w (one Metrics serves one Server)", err)
	}
	return nil
}
