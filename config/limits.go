package config

import (
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
