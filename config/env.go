package config

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// applyEnv overrides settings from the environment (LAKEGATE_*), read
// through getenv.
func (c *Config) applyEnv(getenv func(string) string) error {
	str := func(key string, dst *string) {
		if v := getenv(key); v != "" {
			*dst = v
		}
	}
	str("LAKEGATE_LISTEN", &c.Listen)
	str("LAKEGATE_DATA_DIR", &c.DataDir)
	str("LAKEGATE_JWT_SECRET", &c.JWTSecret)
	str("LAKEGATE_MCP_CONFIG_DIR", &c.MCPConfigDir)
	str("LAKEGATE_LOG_FORMAT", &c.LogFormat)
	str("LAKEGATE_TLS_CERT_FILE", &c.TLSCertFile)
	str("LAKEGATE_TLS_KEY_FILE", &c.TLSKeyFile)
	str("LAKEGATE_TLS_CLIENT_CA_FILE", &c.TLSClientCAFile)
	str("LAKEGATE_MCP_BLOCK_DIR", &c.MCPBlockDir)
	str("LAKEGATE_LOG_LEVEL", &c.LogLevel)
	for key, dst := range map[string]*bool{
		"LAKEGATE_MCP_ENABLED": &c.MCPEnabled,
		"LAKEGATE_MCP_TRACE":   &c.MCPTrace,
	} {
		if v := getenv(key); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s=%q: want true or false", key, v)
			}
			*dst = b
		}
	}
	for key, dst := range map[string]*Duration{
		"LAKEGATE_MCP_KEEPALIVE":     &c.MCPKeepalive,
		"LAKEGATE_STATEMENT_TIMEOUT": &c.StatementTimeout,
		"LAKEGATE_MCP_BLOCK_TTL":     &c.MCPBlockTTL,
		"LAKEGATE_HEADER_TIMEOUT":    &c.HeaderTimeout,
		"LAKEGATE_READ_TIMEOUT":      &c.ReadTimeout,
		"LAKEGATE_IDLE_TIMEOUT":      &c.IdleTimeout,
		"LAKEGATE_DRAIN_TIMEOUT":     &c.DrainTimeout,
	} {
		if v := getenv(key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s=%q: want a duration like 30s", key, v)
			}
			*dst = Duration(d)
		}
	}
	for key, dst := range map[string]*int{
		"LAKEGATE_MCP_MAX_WORKERS":   &c.MCPMaxWorkers,
		"LAKEGATE_DEFAULT_ROW_LIMIT": &c.DefaultRowLimit,
		"LAKEGATE_MAX_ROW_LIMIT":     &c.MaxRowLimit,

		"LAKEGATE_MAX_CONNECTIONS":             &c.MaxConnections,
		"LAKEGATE_MAX_CONNECTIONS_PER_ADDRESS": &c.MaxConnectionsPerAddress,
	} {
		if v := getenv(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s=%q: want a whole number", key, v)
			}
			*dst = n
		}
	}
	if v := getenv("LAKEGATE_MCP_ALLOWED_ORIGINS"); v != "" {
		c.MCPAllowedOrigins = nil
		for o := range strings.SplitSeq(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				c.MCPAllowedOrigins = append(c.MCPAllowedOrigins, o)
			}
		}
	}
	for key, dst := range map[string]*int64{
		"LAKEGATE_MCP_BLOCK_THRESHOLD":          &c.MCPBlockThreshold,
		"LAKEGATE_MCP_BLOCK_SIZE":               &c.MCPBlockSize,
		"LAKEGATE_MCP_BLOCK_BUDGET":             &c.MCPBlockBudget,
		"LAKEGATE_MCP_BLOCK_BUDGET_PER_SUBJECT": &c.MCPBlockBudgetPerSubject,
		"LAKEGATE_MCP_SESSION_QUEUE_BYTES":      &c.MCPSessionQueueBytes,
		"LAKEGATE_MAX_ROW_BYTES":                &c.MaxRowBytes,
	} {
		if v := getenv(key); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%s=%q: want a number of bytes", key, v)
			}
			*dst = n
		}
	}
	if err := c.applyAuthEnv(getenv); err != nil {
		return err
	}
	if err := c.applyLimitsEnv(getenv); err != nil {
		return err
	}
	if v := getenv("LAKEGATE_DATABASES"); v != "" {
		dbs, err := ParseDatabases(v)
		if err != nil {
			return fmt.Errorf("LAKEGATE_DATABASES: %w", err)
		}
		c.Databases = dbs
	} else if v := getenv("LAKEGATE_DATABASE_URL"); v != "" {
		name, err := NameFromURL(v)
		if err != nil {
			return fmt.Errorf("LAKEGATE_DATABASE_URL: %w", err)
		}
		c.Databases = []Database{{Name: name, URL: v}}
	}
	return nil
}

// ParseDatabases reads "name=url,name=url".
func ParseDatabases(s string) ([]Database, error) {
	var dbs []Database
	i := -1
	for item := range strings.SplitSeq(s, ",") {
		i++
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, u, ok := strings.Cut(item, "=")
		if !ok || name == "" || u == "" {
			// The entry is not echoed: it may hold a password.
			return nil, fmt.Errorf("entry %d: want name=url (e.g. iot=postgres://user@host/iot)", i+1)
		}
		dbs = append(dbs, Database{Name: strings.TrimSpace(name), URL: strings.TrimSpace(u)})
	}
	return dbs, nil
}

// NameFromURL is the last path element of a database URL, without extension:
// postgres://h/iot is "iot"; sqlite:./data/demo.db is "demo".
func NameFromURL(raw string) (string, error) {
	var p string
	if strings.HasPrefix(raw, "sqlite:") {
		p = Database{URL: raw}.SQLitePath()
	} else {
		u, err := url.Parse(raw)
		if err != nil {
			return "", fmt.Errorf("not a valid URL (want postgres://user@host/db or sqlite:PATH)")
		}
		p = u.Path
	}
	name := strings.TrimSuffix(path.Base(filepath.ToSlash(p)), path.Ext(p))
	if name == "" || name == "." || name == "/" {
		return "", fmt.Errorf("URL %q names no database (want .../DBNAME)", redactURL(raw))
	}
	return name, nil
}

// redactURL hides a password in a URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
