package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Validate checks every setting and reports all problems at once.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen %q: want host:port, e.g. 127.0.0.1:32049", c.Listen)
	}
	if c.JWTSecret != "" && len(c.JWTSecret) < MinSecretBytes {
		bad("jwt_secret is %d bytes: it must be at least %d bytes (try: openssl rand -hex 32)", len(c.JWTSecret), MinSecretBytes)
	}
	switch {
	case c.ClusterSecret != "" && len(c.ClusterSecret) < MinSecretBytes:
		bad("cluster_secret is %d bytes: it must be at least %d bytes (try: openssl rand -hex 32)", len(c.ClusterSecret), MinSecretBytes)
	case c.ClusterDSN != "" && c.ClusterSecret == "":
		bad("cluster_dsn needs cluster_secret (LAKEGATE_CLUSTER_SECRET): the key replicas sign block reads with, "+
			"at least %d bytes, the same on every replica (try: openssl rand -hex 32)", MinSecretBytes)
	case c.ClusterSecret != "" && c.ClusterSecret == c.JWTSecret:
		bad("cluster_secret equals jwt_secret: give the replicas' key a value of its own (try: openssl rand -hex 32)")
	}
	seen := map[string]bool{}
	for i, db := range c.Databases {
		switch {
		case !validName(db.Name):
			bad("databases[%d]: name %q: want letters, digits, _ or - (starting with a letter)", i, db.Name)
		case seen[db.Name]:
			bad("databases[%d]: name %q is used twice", i, db.Name)
		}
		seen[db.Name] = true
		switch {
		case strings.HasPrefix(db.URL, "postgres://"), strings.HasPrefix(db.URL, "postgresql://"):
		case strings.HasPrefix(db.URL, "sqlite:") && db.SQLitePath() != "":
		default:
			bad("databases[%d] (%s): url must start with postgres://, postgresql:// or sqlite:", i, db.Name)
		}
		if len(db.ReadURLs) > 0 && db.Driver() != "postgres" {
			bad("databases[%d] (%s): read_urls are standbys of a PostgreSQL database; SQLite has none", i, db.Name)
		}
		for j, u := range db.ReadURLs {
			if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
				bad("databases[%d] (%s): read_urls[%d] must start with postgres:// or postgresql://", i, db.Name, j)
			}
		}
		for j, r := range db.Rollups {
			at := fmt.Sprintf("databases[%d] (%s): rollups[%d]", i, db.Name, j)
			switch {
			case r.Table == "" || r.TimeColumn == "":
				bad("%s: table and time_column are required", at)
			case len(r.Values) == 0:
				bad("%s (%s): values are required: the columns whose count, sum, min and max it keeps", at, r.Table)
			case len(r.Resolutions) == 0:
				bad("%s (%s): resolutions are required, such as [\"1m\", \"1h\"]", at, r.Table)
			}
			for _, res := range r.Resolutions {
				if _, _, err := ParseResolution(res); err != nil {
					bad("%s (%s): %v", at, r.Table, err)
				}
			}
		}
	}
	if c.MaxStandbyLag < 0 {
		bad("max_standby_lag %s: want 0 or more", time.Duration(c.MaxStandbyLag))
	}
	if c.MCPAnswerChars < 1000 {
		bad("mcp_answer_chars %d: want at least 1000", c.MCPAnswerChars)
	}
	if c.MCPBlockThreshold < 1024 {
		bad("mcp_block_threshold %d: want at least 1024 bytes", c.MCPBlockThreshold)
	}
	if c.MCPBlockSize < 1024 {
		bad("mcp_block_size %d: want at least 1024 bytes", c.MCPBlockSize)
	}
	if c.MCPBlockTTL < Duration(time.Second) {
		bad("mcp_block_ttl %s: want at least 1s", time.Duration(c.MCPBlockTTL))
	}
	if c.MCPBlockBudgetPerSubject < c.MCPBlockThreshold || c.MCPBlockBudget < c.MCPBlockBudgetPerSubject {
		bad("mcp_block_budget %d / mcp_block_budget_per_subject %d: want mcp_block_threshold <= per subject <= total",
			c.MCPBlockBudget, c.MCPBlockBudgetPerSubject)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		bad("tls_cert_file and tls_key_file: give both or neither")
	}
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		bad("tls_client_ca_file needs tls_cert_file and tls_key_file (mutual TLS runs over TLS)")
	}
	c.validateAuth(bad)
	c.validateLimits(bad)
	for i, f := range c.AllowedFunctions {
		schema, name, qualified := strings.Cut(strings.ToLower(f), ".")
		switch {
		case qualified && !validIdent(schema), !validIdent(name) && !(qualified && name == "*"):
			bad("allowed_functions[%d] %q: want name, schema.name or schema.* with plain identifiers (letters, digits, _), e.g. my_stats.*", i, f)
		case qualified && name == "*" && (schema == "pg_catalog" || schema == "information_schema"):
			bad("allowed_functions[%d] %q: would open every built-in function, those that read files and other sessions too; list the functions one by one", i, f)
		}
	}
	if c.MCPMaxWorkers < 1 {
		bad("mcp_max_workers %d: want at least 1", c.MCPMaxWorkers)
	}
	if c.MCPKeepalive < Duration(time.Second) {
		bad("mcp_keepalive %s: want at least 1s", time.Duration(c.MCPKeepalive))
	}
	if c.MCPSessionQueue < 1 {
		bad("mcp_session_queue %d: want at least 1", c.MCPSessionQueue)
	}
	if c.MCPWriteTimeout < Duration(100*time.Millisecond) {
		bad("mcp_write_timeout %s: want at least 100ms", time.Duration(c.MCPWriteTimeout))
	}
	if c.MCPSessionIdleAfter < Duration(time.Second) {
		bad("mcp_session_idle_after %s: want at least 1s", time.Duration(c.MCPSessionIdleAfter))
	}
	if c.StatementTimeout < Duration(10*time.Millisecond) {
		bad("statement_timeout %s: want at least 10ms", time.Duration(c.StatementTimeout))
	}
	if c.DefaultRowLimit < 1 || c.MaxRowLimit < c.DefaultRowLimit {
		bad("default_row_limit %d / max_row_limit %d: want 1 <= default <= max", c.DefaultRowLimit, c.MaxRowLimit)
	}
	if c.MaxRowBytes < 1024 {
		bad("max_row_bytes %d: want at least 1024", c.MaxRowBytes)
	}
	if c.MCPSessionQueueBytes < 0 {
		bad("mcp_session_queue_bytes %d: want 0 (4 × mcp_block_threshold) or more", c.MCPSessionQueueBytes)
	}
	if c.GCHeadroom < 0 {
		bad("gc_headroom %d: want 0 (off) or more", c.GCHeadroom)
	}
	if c.MaxBodyBytes < 1024 {
		bad("max_body_bytes %d: want at least 1024", c.MaxBodyBytes)
	}
	if c.HeaderTimeout < Duration(100*time.Millisecond) || c.ReadTimeout < c.HeaderTimeout || c.IdleTimeout < Duration(time.Second) {
		bad("header_timeout %s / read_timeout %s / idle_timeout %s: want header_timeout at least 100ms, read_timeout at least header_timeout, idle_timeout at least 1s",
			time.Duration(c.HeaderTimeout), time.Duration(c.ReadTimeout), time.Duration(c.IdleTimeout))
	}
	if c.DrainTimeout < 0 {
		bad("drain_timeout %s: want 0 (stop at once) or more", time.Duration(c.DrainTimeout))
	}
	if c.MaxConnections < 0 || c.MaxConnectionsPerAddress < 0 {
		bad("max_connections %d / max_connections_per_address %d: want 0 or more", c.MaxConnections, c.MaxConnectionsPerAddress)
	}
	for i, o := range c.MCPAllowedOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			bad("mcp_allowed_origins[%d] %q: want scheme://host[:port], e.g. https://app.example.com, or *", i, o)
		}
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log_format %q: want text or json", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level %q: want debug, info, warn or error", c.LogLevel)
	}
	return errors.Join(errs...)
}

// validIdent reports whether s is a plain SQL identifier: a letter or _,
// then letters, digits or _, at most 63 bytes.
func validIdent(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func validName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '_' || r == '-'):
		default:
			return false
		}
	}
	return true
}
