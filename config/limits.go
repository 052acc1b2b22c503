package config

import (
	"fmt"
	"strconv"
	"time"
)

// Defaults of the limit and observability settings.
const (
	DefaultPoolWorkers              = 20
	DefaultWorkerWait               = 10 * time.Second
	DefaultRateLimitRPS             = 50
	DefaultRateLimitBurst           = 100
	DefaultMaxQueriesPerSubject     = 8
	DefaultMCPMaxSessions           = 2000
	DefaultMCPMaxSessionsPerSubject = 64
)

// applyLimitsEnv reads the LAKEGATE_* variables of the worker pool, the
// rate limits, the session limits and the metrics.
func (c *Config) applyLimitsEnv(getenv func(string) string) error {
	for key, dst := range map[string]*int{
		"LAKEGATE_MAX_WORKERS":                  &c.MaxWorkers,
		"LAKEGATE_RATE_LIMIT_BURST":             &c.RateLimitBurst,
		"LAKEGATE_MAX_QUERIES_PER_SUBJECT":      &c.MaxQueriesPerSubject,
		"LAKEGATE_MCP_MAX_SESSIONS":             &c.MCPMaxSessions,
		"LAKEGATE_MCP_MAX_SESSIONS_PER_SUBJECT": &c.MCPMaxSessionsPerSubject,
	} {
		if v := getenv(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s=%q: want a whole number", key, v)
			}
			*dst = n
		}
	}
	if v := getenv("LAKEGATE_RATE_LIMIT_RPS"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("LAKEGATE_RATE_LIMIT_RPS=%q: want a number of requests per second, e.g. 50 or 0.5", v)
		}
		c.RateLimitRPS = f
	}
	if v := getenv("LAKEGATE_WORKER_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("LAKEGATE_WORKER_WAIT=%q: want a duration like 10s", v)
		}
		c.WorkerWait = Duration(d)
	}
	if v := getenv("LAKEGATE_METRICS_AUTH"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("LAKEGATE_METRICS_AUTH=%q: want true or false", v)
		}
		c.MetricsAuth = b
	}
	return nil
}

// validateLimits checks the worker pool, rate limit and session settings.
func (c *Config) validateLimits(bad func(format string, args ...any)) {
	if c.MaxWorkers < 1 {
		bad("max_workers %d: want at least 1", c.MaxWorkers)
	} else if c.MCPMaxWorkers > c.MaxWorkers {
		bad("mcp_max_workers %d is over max_workers %d: MCP's share must fit in the shared pool (leave room for REST clients)",
			c.MCPMaxWorkers, c.MaxWorkers)
	}
	if c.WorkerWait < Duration(time.Millisecond) {
		bad("worker_wait %s: want at least 1ms", time.Duration(c.WorkerWait))
	}
	if c.RateLimitRPS < 0 {
		bad("rate_limit_rps %g: want 0 (no limit) or more", c.RateLimitRPS)
	}
	if c.RateLimitRPS > 0 && c.RateLimitBurst < 1 {
		bad("rate_limit_burst %d: want at least 1 when rate_limit_rps is set", c.RateLimitBurst)
	}
	if c.MaxQueriesPerSubject < 0 {
		bad("max_queries_per_subject %d: want 0 (no limit) or more", c.MaxQueriesPerSubject)
	}
	if c.MCPMaxSessions < 1 || c.MCPMaxSessionsPerSubject < 1 || c.MCPMaxSessionsPerSubject > c.MCPMaxSessions {
		bad("mcp_max_sessions %d / mcp_max_sessions_per_subject %d: want 1 <= per subject <= total",
			c.MCPMaxSessions, c.MCPMaxSessionsPerSubject)
	}
}
