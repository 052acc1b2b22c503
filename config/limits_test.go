package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLimitsFromFileAndEnv(t *testing.T) {
	file := writeFile(t, "c.yaml", `
max_workers: 30
mcp_max_workers: 12
worker_wait: 2s
rate_limit_rps: 0.5
rate_limit_burst: 3
max_queries_per_subject: 0
mcp_max_sessions: 100
mcp_max_sessions_per_subject: 5
metrics_auth: false
`)
	got, err := Load(file, env(map[string]string{"LAKEGATE_RATE_LIMIT_BURST": "4", "LAKEGATE_WORKER_WAIT": "250ms"}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Default()
	want.MaxWorkers, want.MCPMaxWorkers, want.WorkerWait = 30, 12, Duration(250*time.Millisecond)
	want.RateLimitRPS, want.RateLimitBurst, want.MaxQueriesPerSubject = 0.5, 4, 0
	want.MCPMaxSessions, want.MCPMaxSessionsPerSubject, want.MetricsAuth = 100, 5, false
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if d := Default(); !d.MetricsAuth || d.RateLimitRPS <= 0 || d.MCPMaxWorkers > d.MaxWorkers {
		t.Errorf("defaults: got metrics_auth %v, rate_limit_rps %v, mcp_max_workers %d of max_workers %d; want auth on, a rate limit, MCP's share inside the pool",
			d.MetricsAuth, d.RateLimitRPS, d.MCPMaxWorkers, d.MaxWorkers)
	}
}

func TestLimitsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
		env    map[string]string
		want   string
	}{
		{"MCP share over the pool", func(c *Config) { c.MaxWorkers, c.MCPMaxWorkers = 4, 5 }, nil, "mcp_max_workers 5 is over max_workers 4"},
		{"no workers", func(c *Config) { c.MaxWorkers = 0 }, nil, "max_workers 0: want at least 1"},
		{"negative rate", func(c *Config) { c.RateLimitRPS = -1 }, nil, "rate_limit_rps -1"},
		{"rate without burst", func(c *Config) { c.RateLimitRPS, c.RateLimitBurst = 5, 0 }, nil, "rate_limit_burst 0"},
		{"per subject over total", func(c *Config) { c.MCPMaxSessions, c.MCPMaxSessionsPerSubject = 10, 11 }, nil, "mcp_max_sessions 10 / mcp_max_sessions_per_subject 11"},
		{"env rate not a number", nil, map[string]string{"LAKEGATE_RATE_LIMIT_RPS": "fast"}, `LAKEGATE_RATE_LIMIT_RPS="fast"`},
		{"env bool", nil, map[string]string{"LAKEGATE_METRICS_AUTH": "maybe"}, `LAKEGATE_METRICS_AUTH="maybe": want true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.change != nil {
				c := Default()
				tc.change(&c)
				err = c.Validate()
			} else {
				_, err = Load("", env(tc.env))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
