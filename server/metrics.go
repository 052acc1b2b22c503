package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/query"
)

// durationBuckets (seconds) reach from a point query to a long event
// stream.
var durationBuckets = [...]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Metrics is lakegate's Prometheus registry (its own, never the global
// one) and the measurements taken on the request path. Build it with
// NewMetrics, give it to the plugin as mcp.Options.Observer, to
// NewLimits, and to New in Options.Metrics; New adds the values read at
// scrape time (sessions, workers, database pools, breakers, blocks).
// It is safe for concurrent use.
type Metrics struct {
	reg            *prometheus.Registry
	httpRequests   *prometheus.CounterVec
	httpDuration   *prometheus.HistogramVec
	toolCalls      *prometheus.CounterVec
	toolDuration   *prometheus.HistogramVec
	queryDuration  *prometheus.HistogramVec
	rows           *prometheus.CounterVec
	bytes          *prometheus.CounterVec
	rateLimited    *prometheus.CounterVec
	workerTimeouts *prometheus.CounterVec
	connsOpen      prometheus.Gauge
	connsCapped    *prometheus.CounterVec
	// history is the last hour of tool calls, for the console.
	history history
}

var _ host.Observer = (*Metrics)(nil)

// NewMetrics builds the registry with the Go runtime and process
// collectors and lakegate's request metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_http_requests_total", Help: "HTTP requests answered, by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lakegate_http_request_duration_seconds", Help: "Time to answer an HTTP request (event streams: their lifetime), by route pattern and method.",
			Buckets: durationBuckets[:],
		}, []string{"route", "method"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_mcp_tool_calls_total", Help: "MCP tool calls, by tool and outcome (ok or the error kind).",
		}, []string{"tool", "outcome"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lakegate_mcp_tool_call_duration_seconds", Help: "Time of an MCP tool call, waiting for a worker included, by tool and outcome.",
			Buckets: durationBuckets[:],
		}, []string{"tool", "outcome"}),
		queryDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lakegate_query_duration_seconds", Help: "Time database work held a worker, by origin (rest, ingest, mcp).",
			Buckets: durationBuckets[:],
		}, []string{"origin"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_rows_returned_total", Help: "Result rows returned, by origin (rest, mcp).",
		}, []string{"origin"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_bytes_returned_total", Help: "Result bytes returned (REST bodies, MCP tool result content), by origin.",
		}, []string{"origin"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_rate_limited_total", Help: "Requests refused by a limit: requests (per second per subject), queries (concurrent per subject), sessions (MCP).",
		}, []string{"limit"}),
		workerTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_worker_wait_timeouts_total", Help: "Requests answered unavailable after waiting worker_wait for a worker, by origin.",
		}, []string{"origin"}),
		connsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lakegate_connections_open", Help: "Client connections open on the TCP listener.",
		}),
		connsCapped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lakegate_connections_capped_total", Help: "Connections closed to make room (closed_quiet: idle or not yet sending; closed_receiving: a request still arriving) or refused (refused) at a connection cap (overall, per_address).",
		}, []string{"cap", "action"}),
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.httpRequests, m.httpDuration, m.toolCalls, m.toolDuration, m.queryDuration, m.rows, m.bytes, m.rateLimited, m.workerTimeouts,
		m.connsOpen, m.connsCapped)
	// Series that exist from the start, so that rates and alerts see zeros.
	for _, l := range []string{limitRequests, limitQueries, limitSessions} {
		m.rateLimited.WithLabelValues(l)
	}
	for _, c := range []string{"overall", "per_address"} {
		m.connsCapped.WithLabelValues(c, "closed_quiet")
		m.connsCapped.WithLabelValues(c, "closed_receiving")
		m.connsCapped.WithLabelValues(c, "refused")
	}
	for _, c := range workClassNames {
		m.workerTimeouts.WithLabelValues(c)
	}
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ToolCall implements host.Observer.
func (m *Metrics) ToolCall(tc host.ToolCall) {
	m.toolCalls.WithLabelValues(tc.Tool, tc.Outcome).Inc()
	m.toolDuration.WithLabelValues(tc.Tool, tc.Outcome).Observe(tc.Duration.Seconds())
	m.history.record(tc.Tool, tc.Outcome != "ok", tc.Duration)
	if tc.Outcome == "ok" {
		m.returned(workMCP, tc.Rows, tc.Bytes)
	}
}

// SessionRefused implements host.Observer.
func (m *Metrics) SessionRefused(string) {
	m.rateLimited.WithLabelValues(limitSessions).Inc()
}

func (m *Metrics) returned(origin workClass, rows, bytes int64) {
	m.rows.WithLabelValues(origin.String()).Add(float64(rows))
	m.bytes.WithLabelValues(origin.String()).Add(float64(bytes))
}

// observeHTTP counts every request by its route pattern (never the raw
// path, which would make a series per table or session).
func (m *Metrics) observeHTTP(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	method := c.Request.Method
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions:
	default:
		method = "other"
	}
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(c.Writer.Status())).Inc()
	m.httpDuration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
}

// stateCollector reads, at scrape time, the values that are states rather
// than events: open sessions, workers, database pools, circuit breakers
// and the block store.
type stateCollector struct{ s *Server }

var (
	descMCPEnabled     = prometheus.NewDesc("lakegate_mcp_enabled", "1 when the MCP plugin is enabled.", nil, nil)
	descSessions       = prometheus.NewDesc("lakegate_mcp_sessions_open", "Open MCP sessions, by transport.", []string{"transport"}, nil)
	descWorkersMax     = prometheus.NewDesc("lakegate_workers_max", "Worker slots: the shared pool (all) and MCP's share of it (mcp).", []string{"pool"}, nil)
	descWorkersInUse   = prometheus.NewDesc("lakegate_workers_in_use", "Worker slots held, by origin.", []string{"origin"}, nil)
	descWorkersWaiting = prometheus.NewDesc("lakegate_workers_waiting", "Requests waiting for a worker slot, by origin.", []string{"origin"}, nil)
	descDBConns        = prometheus.NewDesc("lakegate_db_pool_connections", "PostgreSQL pool connections, by database and state (acquired, idle, total, max).", []string{"database", "state"}, nil)
	descDBAcquires     = prometheus.NewDesc("lakegate_db_pool_acquires_total", "Connections acquired from the pool, by database.", []string{"database"}, nil)
	descDBEmpty        = prometheus.NewDesc("lakegate_db_pool_empty_acquires_total", "Acquisitions that waited for a connection, by database.", []string{"database"}, nil)
	descDBWait         = prometheus.NewDesc("lakegate_db_pool_acquire_seconds_total", "Time spent acquiring connections, by database.", []string{"database"}, nil)
	descBreaker        = prometheus.NewDesc("lakegate_db_circuit_state", "Circuit breaker state by database: 1 for the current state (closed, open, half_open), 0 for the others.", []string{"database", "state"}, nil)
	descStandby        = prometheus.NewDesc("lakegate_db_standby_state", "Standby state by database and standby (host:port): 1 for the current state (ok, lagging, down), 0 for the others.", []string{"database", "standby", "state"}, nil)
	descStandbyLag     = prometheus.NewDesc("lakegate_db_standby_lag_seconds", "Replay lag of a standby at its last check.", []string{"database", "standby"}, nil)
	descStandbyReads   = prometheus.NewDesc("lakegate_db_standby_reads_total", "Reads sent to a standby.", []string{"database", "standby"}, nil)
	descBlockTransfers = prometheus.NewDesc("lakegate_block_transfers_total", "Block transfers committed.", nil, nil)
	descBlocks         = prometheus.NewDesc("lakegate_blocks_total", "Blocks written.", nil, nil)
	descBlockBytes     = prometheus.NewDesc("lakegate_block_bytes_total", "Bytes written to blocks.", nil, nil)
	descBlocksStored   = prometheus.NewDesc("lakegate_block_transfers_stored", "Block transfers held in the store now.", nil, nil)
	descBlockBytesNow  = prometheus.NewDesc("lakegate_block_bytes_stored", "Bytes held in the block store now.", nil, nil)
	descTailWaiters    = prometheus.NewDesc("lakegate_tail_waiters", "Tails (and watch subscriptions) waiting for rows now, by database.", []string{"database"}, nil)
	descTailSignals    = prometheus.NewDesc("lakegate_tail_signals_total", "Signals that rows arrived, by database and source (ingest: this replica's; notify: another's; recheck: another program's).", []string{"database", "source"}, nil)
	descSubscriptions  = prometheus.NewDesc("lakegate_mcp_subscriptions_open", "Watch resources followed for MCP clients.", nil, nil)
	descNotifications  = prometheus.NewDesc("lakegate_mcp_resource_notifications_total", "notifications/resources/updated sent.", nil, nil)
	descCacheHits      = prometheus.NewDesc("lakegate_cache_hits_total", "Reads answered from the result cache.", nil, nil)
	descCacheMisses    = prometheus.NewDesc("lakegate_cache_misses_total", "Reads the result cache did not hold (run, and kept when they fit).", nil, nil)
	descCacheEvictions = prometheus.NewDesc("lakegate_cache_evictions_total", "Result cache entries dropped to make room.", nil, nil)
	descCacheBytes     = prometheus.NewDesc("lakegate_cache_bytes", "Bytes the result cache holds, and its bound (max).", []string{"kind"}, nil)
	descCacheEntries   = prometheus.NewDesc("lakegate_cache_entries", "Results the result cache holds.", nil, nil)
)

func (sc stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMCPEnabled, descSessions, descWorkersMax, descWorkersInUse, descWorkersWaiting,
		descDBConns, descDBAcquires, descDBEmpty, descDBWait, descBreaker, descStandby, descStandbyLag, descStandbyReads,
		descBlockTransfers, descBlocks, descBlockBytes, descBlocksStored, descBlockBytesNow,
		descTailWaiters, descTailSignals, descSubscriptions, descNotifications,
		descCacheHits, descCacheMisses, descCacheEvictions, descCacheBytes, descCacheEntries} {
		ch <- d
	}
}

func (sc stateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	st, _ := sc.s.plugin.status() // without a report: whether it is on
	gauge(descMCPEnabled, boolFloat(st.Enabled))
	for _, t := range []string{"sse", "streamable", "stdio"} {
		gauge(descSessions, float64(st.Sessions[t]), t)
	}
	if b := st.Blocks; b != nil {
		counter(descBlockTransfers, float64(b.Transfers))
		counter(descBlocks, float64(b.Blocks))
		counter(descBlockBytes, float64(b.Bytes))
		gauge(descBlocksStored, float64(b.StoredNow))
		gauge(descBlockBytesNow, float64(b.StoredBytesNow))
	}

	l := sc.s.limits
	gauge(descWorkersMax, float64(cap(l.all)), "all")
	gauge(descWorkersMax, float64(cap(l.mcp)), "mcp")
	for c := range numWorkClasses {
		gauge(descWorkersInUse, float64(l.inUse[c].Load()), c.String())
		gauge(descWorkersWaiting, float64(l.waiting[c].Load()), c.String())
	}

	for _, p := range sc.s.engine.PoolStats() {
		gauge(descDBConns, float64(p.Acquired), p.Database, "acquired")
		gauge(descDBConns, float64(p.Idle), p.Database, "idle")
		gauge(descDBConns, float64(p.Total), p.Database, "total")
		gauge(descDBConns, float64(p.Max), p.Database, "max")
		counter(descDBAcquires, float64(p.AcquireCount), p.Database)
		counter(descDBEmpty, float64(p.EmptyAcquireCount), p.Database)
		counter(descDBWait, p.AcquireDuration.Seconds(), p.Database)
	}
	for _, sb := range sc.s.engine.StandbyStats() {
		for _, st := range []query.StandbyState{query.StandbyOK, query.StandbyLagging, query.StandbyDown} {
			gauge(descStandby, boolFloat(st == sb.State), sb.Database, sb.Standby, string(st))
		}
		gauge(descStandbyLag, sb.Lag.Seconds(), sb.Database, sb.Standby)
		counter(descStandbyReads, float64(sb.Reads), sb.Database, sb.Standby)
	}
	cs := sc.s.engine.CacheStats()
	counter(descCacheHits, float64(cs.Hits))
	counter(descCacheMisses, float64(cs.Misses))
	counter(descCacheEvictions, float64(cs.Evictions))
	gauge(descCacheBytes, float64(cs.Bytes), "held")
	gauge(descCacheBytes, float64(cs.MaxBytes), "max")
	gauge(descCacheEntries, float64(cs.Entries))
	gauge(descSubscriptions, float64(st.Subscriptions.Open))
	counter(descNotifications, float64(st.Subscriptions.Notifications))
	for _, t := range sc.s.engine.TailStats() {
		gauge(descTailWaiters, float64(t.Waiters), t.Database)
		for src, n := range t.Signals {
			counter(descTailSignals, float64(n), t.Database, src)
		}
	}
	for db, state := range sc.s.engine.BreakerStates() {
		for _, s := range []query.BreakerState{query.BreakerClosed, query.BreakerOpen, query.BreakerHalfOpen} {
			gauge(descBreaker, boolFloat(s == state), db, string(s))
		}
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// mountObservability adds GET /ready (open, like /health) and GET
// /metrics: open with metrics_auth false, else for admin tokens only.
func (s *Server) mountObservability(r *gin.Engine) {
	r.GET("/ready", s.ready)
	metrics := gin.WrapH(s.metrics.Handler())
	if s.cfg.MetricsAuth {
		r.GET("/metrics", s.auth.authenticate, requireRole(lakegate.RoleAdmin), metrics)
	} else {
		r.GET("/metrics", metrics)
	}
}
