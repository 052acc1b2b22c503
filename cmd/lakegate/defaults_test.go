package main

import (
	"testing"
	"time"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/mcp"
	"github.com/lakegate/lakegate/query"
)

// config declares every setting's default once for the server; the
// packages keep their own for their zero values (config cannot be
// imported by them both ways). They must never drift apart.
func TestDefaultsAgree(t *testing.T) {
	c := config.Default()
	for _, d := range []struct {
		name        string
		config, pkg any
	}{
		{"statement_timeout / query", time.Duration(c.StatementTimeout), query.DefaultStatementTimeout},
		{"default_row_limit / query", c.DefaultRowLimit, query.DefaultLimit},
		{"max_row_limit / query", c.MaxRowLimit, query.DefaultMaxLimit},
		{"max_row_bytes / query", c.MaxRowBytes, int64(query.DefaultMaxRowBytes)},
		{"worker_wait / query", time.Duration(c.WorkerWait), query.DefaultAcquireWait},
		{"worker_wait / mcp", time.Duration(c.WorkerWait), mcp.DefaultWorkerWait},
		{"mcp_keepalive / mcp", time.Duration(c.MCPKeepalive), mcp.DefaultKeepalive},
		{"mcp_write_timeout / mcp", time.Duration(c.MCPWriteTimeout), mcp.DefaultWriteTimeout},
		{"mcp_session_queue / mcp", c.MCPSessionQueue, mcp.DefaultSessionQueue},
		{"mcp_max_workers / mcp", c.MCPMaxWorkers, mcp.DefaultMaxWorkers},
		{"mcp_block_threshold / mcp", c.MCPBlockThreshold, int64(mcp.DefaultBlockThreshold)},
		{"mcp_max_sessions / mcp", c.MCPMaxSessions, mcp.DefaultMaxSessions},
		{"mcp_max_sessions_per_subject / mcp", c.MCPMaxSessionsPerSubject, mcp.DefaultMaxSessionsPerSubject},
		{"mcp_block_size / blocktransport", c.MCPBlockSize, int64(blocktransport.DefaultBlockSize)},
		{"mcp_block_ttl / blocktransport", time.Duration(c.MCPBlockTTL), blocktransport.DefaultTTL},
	} {
		if d.config != d.pkg {
			t.Errorf("%s: config says %v, the package %v", d.name, d.config, d.pkg)
		}
	}
}
