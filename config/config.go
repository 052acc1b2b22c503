// Package config holds lakegate's one Config struct: its defaults, loading
// from a file (JSON or YAML), the environment (LAKEGATE_*) and validation.
//
// It is a leaf: it imports nothing of lakegate's but the did-you-mean of
// internal/suggest, and every package may read it.
package config

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Defaults of the settings that have one.
const (
	DefaultPort             = 32049
	DefaultListen           = "127.0.0.1:32049"
	DefaultDataDir          = "./lakegate-data"
	DefaultBlockThreshold   = 10 << 20
	DefaultAnswerChars      = 40000
	DefaultBlockSize        = 1 << 20
	DefaultBlockTTL         = 15 * time.Minute
	DefaultBlockBudget      = 4 << 30
	DefaultBlockBudgetUser  = 1 << 30
	DefaultMaxWorkers       = 10
	DefaultKeepalive        = 30 * time.Second
	DefaultStatementTimeout = 30 * time.Second
	DefaultJobTimeout       = time.Hour
	DefaultJobAfter         = 5 * time.Second
	DefaultTailRecheck      = time.Second
	DefaultResultCacheBytes = 64 << 20
	DefaultGCHeadroom       = 8 << 20
	DefaultJobsPerSubject   = 4
	DefaultRowLimit         = 100
	DefaultMaxRowLimit      = 10_000_000
	DefaultMaxRowBytes      = 16 << 20
	DefaultMaxBodyBytes     = 32 << 20
	// DefaultMaxConnectionsPerAddress bounds one remote address's open
	// connections.
	DefaultMaxConnectionsPerAddress = 1024
	DefaultHeaderTimeout            = 10 * time.Second
	DefaultReadTimeout              = 30 * time.Second
	DefaultIdleTimeout              = 2 * time.Minute
	DefaultDrainTimeout             = 10 * time.Second
	DefaultSessionQueue             = 64
	DefaultWriteTimeout             = 10 * time.Second
	DefaultSessionIdleAfter         = 5 * time.Minute
	// MinSecretBytes is the shortest HS256 secret accepted.
	MinSecretBytes = 32
)

// Database names one data source. URL is postgres://... or sqlite:PATH.
type Database struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// ReadURLs name hot standbys of a PostgreSQL database: reads go to a
	// healthy one, writes to URL.
	ReadURLs []string `json:"read_urls,omitempty"`
	// Rollups are the tables of partial aggregates lakegate keeps for
	// tables of this database, for time series.
	Rollups []Rollup `json:"rollups,omitempty"`
}

// Rollup declares the rollups of one table: per bucket of each
// resolution and each value of the key columns, the rows' count and each
// value column's count, sum, min and max, kept by every ingest into the
// table and built for the rows already there by lakegate admin rollups
// build.
type Rollup struct {
	Table      string   `json:"table"`
	TimeColumn string   `json:"time_column"`
	Keys       []string `json:"keys,omitempty"`
	Values     []string `json:"values"`
	// Resolutions are bucket widths: a count and s, m, h or d ("1m",
	// "1h"), at most a day.
	Resolutions []string `json:"resolutions"`
}

// ParseResolution reads a rollup resolution ("10s", "1m", "1h", "1d")
// into its count and unit (second, minute, hour or day).
func ParseResolution(s string) (count int, unit string, err error) {
	units := map[byte]string{'s': "second", 'm': "minute", 'h': "hour", 'd': "day"}
	if len(s) >= 2 {
		if u, ok := units[s[len(s)-1]]; ok {
			if n, err := strconv.Atoi(s[:len(s)-1]); err == nil && n >= 1 && s[0] != '+' {
				return n, u, nil
			}
		}
	}
	return 0, "", fmt.Errorf("resolution %q: want a count and s, m, h or d, such as 1m or 1h", s)
}

// Driver returns "postgres" or "sqlite" from the URL's scheme.
func (d Database) Driver() string {
	if strings.HasPrefix(d.URL, "sqlite:") {
		return "sqlite"
	}
	return "postgres"
}

// SQLitePath returns the file path of a sqlite: URL.
func (d Database) SQLitePath() string {
	p := strings.TrimPrefix(d.URL, "sqlite:")
	return strings.TrimPrefix(p, "//")
}

// Duration is a time.Duration read from "30s"-style strings in files.
type Duration time.Duration

// UnmarshalJSON accepts a Go duration string ("30s", "1m") or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, ok := parseDuration(s)
		if !ok {
			// A type error lets encoding/json name the setting and offset.
			return &json.UnmarshalTypeError{Value: strconv.Quote(s), Type: reflect.TypeFor[Duration]()}
		}
		*d = v
		return nil
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil {
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[Duration]()}
	}
	*d = Duration(time.Duration(n * float64(time.Second)))
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Config is the whole configuration of one lakegate process. Each field is
// one setting, declared here once (Settings lists them): its json tag is
// the config file key, and LAKEGATE_ and the key in upper case its
// environment variable; its help tag is the line serve --help and README
// show; its default is Default's value, or the default tag where that is
// worked out at start; example shows the JSON of a structured setting.
type Config struct {
	// Listen is the TCP address of the HTTP server.
	Listen string `json:"listen" help:"TCP address (host:port) to serve on; serve --listen overrides it"`
	// Databases are the sources served. Empty means the embedded demo.
	Databases []Database `json:"databases" default:"embedded demo" help:"data sources: name=url,... (postgres://... or sqlite:PATH); or LAKEGATE_DATABASE_URL for one"`
	// DataDir holds the embedded demo database and other local state.
	DataDir string `json:"data_dir" help:"where the embedded demo database and the block spool live"`
	// JWTSecret is the HS256 secret (at least 32 bytes). Empty, with no
	// other JWT key: one is generated for the run.
	JWTSecret string `json:"jwt_secret" default:"generated per run when no other way in is set" help:"HS256 secret, at least 32 bytes"`
	// JWTPublicKeyFiles are PEM public keys (RSA: RS256, Ed25519: EdDSA,
	// ECDSA P-256: ES256); each verifies only tokens of its algorithm.
	JWTPublicKeyFiles []string `json:"jwt_public_key_files" help:"PEM public keys (comma-separated): RSA verifies RS256, Ed25519 EdDSA, ECDSA P-256 ES256"`
	// JWTJWKSURL is a JWK Set (https) whose keys verify tokens by kid,
	// refreshed hourly and when an unknown kid is seen (at most once a
	// minute).
	JWTJWKSURL string `json:"jwt_jwks_url" help:"a JWK Set URL (https; http on loopback) whose keys verify tokens by kid"`
	// JWTIssuer and JWTAudience, when set, are required in the iss and aud
	// claims.
	JWTIssuer   string `json:"jwt_issuer" help:"when set, a token's iss must equal it"`
	JWTAudience string `json:"jwt_audience" help:"when set, a token's aud must hold it"`
	// JWTRolesClaim is the claim holding the caller's roles (a string or a
	// list of strings; a dotted path reads a nested claim). With the
	// default, "roles", a "role" claim is read too.
	JWTRolesClaim string `json:"jwt_roles_claim" help:"claim holding the caller's roles (a.b reads a nested claim)"`
	// AuthorizationServers are OAuth issuer URLs (https; http on loopback)
	// whose access tokens are accepted when their aud names this server
	// (PublicURL, PublicURL/mcp or PublicURL/mcp/sse); their keys come
	// from the jwks_uri of their metadata. Set, the server publishes RFC
	// 9728 metadata naming them and points every 401 at it (MCP
	// authorization discovery). It needs PublicURL.
	AuthorizationServers []string `json:"authorization_servers" help:"OAuth issuer URLs (comma-separated) whose tokens for public_url are accepted"`
	// PublicURL is the URL clients reach this server at
	// (scheme://host[:port], as a reverse proxy in front shows it): the
	// OAuth resource identifier. The request's Host is not used, since a
	// client chooses it.
	PublicURL string `json:"public_url" help:"URL clients reach this server at (scheme://host[:port]); needed by authorization_servers"`
	// Access narrows, per role, the databases and tables callers may use
	// and the PostgreSQL role their queries run as.
	Access map[string]RoleAccess `json:"access" help:"per role: the databases and tables it may use and the pg_role its queries run as (JSON)" example:"{\"analyst\": {\"databases\": [\"iot\"], \"tables\": {\"iot\": [\"readings\"]}, \"pg_role\": \"lakegate_analyst\"}}"`
	// QueryRole is the PostgreSQL role callers' SQL runs as (SET LOCAL
	// ROLE in each read transaction) when their access rule names no
	// pg_role; the connecting user must be a member of it. Empty: the
	// connecting user itself. Give it SELECT on the served tables only.
	QueryRole string `json:"query_role" help:"PostgreSQL role callers' SQL runs as (SET LOCAL ROLE) when their access rule names no pg_role"`
	// AllowPrivilegedRole lets the server start although callers' SQL
	// would run as (or could return to) a privileged PostgreSQL role: a
	// superuser, one with BYPASSRLS or CREATEROLE, a member of the roles
	// that read server files, run programs, signal backends or read every
	// table, an owner of served tables, or one that reads tables its
	// access rule does not list. Each finding is logged at WARN on every
	// start.
	AllowPrivilegedRole bool `json:"allow_privileged_role" help:"start although callers' SQL would run as a privileged PostgreSQL role (logged at WARN)"`
	// ServerInfoFunctions says who may call SQL functions that read server
	// information (settings, version, addresses, paths, other sessions):
	// ServerInfoAdmin (the default; empty means it), ServerInfoAll or
	// ServerInfoNone.
	ServerInfoFunctions string `json:"server_info_functions" help:"who may call SQL functions reading server information (version(), ...): admin, all or none"`
	// AllowedFunctions are SQL functions callers may call besides those
	// on lakegate's allow list (pure computations; package
	// query/validate): each "name", "schema.name" or "schema.*", plain
	// identifiers. Server-information functions follow
	// ServerInfoFunctions whatever this says.
	AllowedFunctions []string `json:"allowed_functions" help:"SQL functions callers may call beyond lakegate's list: name, schema.name or schema.*"`

	// TLSCertFile and TLSKeyFile (PEM) turn on HTTPS, and HTTP/3 on the
	// same port number over UDP.
	TLSCertFile string `json:"tls_cert_file" help:"PEM certificate: serve HTTPS, and HTTP/3 on the same UDP port (with tls_key_file)"`
	TLSKeyFile  string `json:"tls_key_file" help:"PEM private key of tls_cert_file"`
	// TLSClientCAFile (PEM) asks clients for a certificate signed by one of
	// its CAs (mutual TLS).
	TLSClientCAFile string `json:"tls_client_ca_file" help:"PEM CAs: mutual TLS, every client must show a certificate they signed"`
	// TLSClientCertAuth lets a verified client certificate identify a
	// request that has no bearer token: the subject is the certificate's
	// common name, the roles are TLSClientCertRoles.
	TLSClientCertAuth  bool     `json:"tls_client_cert_auth" help:"a verified client certificate with no bearer token runs as its common name"`
	TLSClientCertRoles []string `json:"tls_client_cert_roles" help:"roles (comma-separated) of callers identified by a client certificate"`

	MCPEnabled bool `json:"mcp_enabled" help:"MCP routes on at start (lakegate admin mcp enable turns them on later)"`
	// ClusterDSN names a PostgreSQL database that replicas share state
	// through: the MCP switch (cluster package). Its role must be able to
	// create a table in it.
	ClusterDSN string `json:"cluster_dsn" help:"PostgreSQL URL the replicas share the MCP switch through; empty: this server alone"`
	// ClusterSecret is the key (at least 32 bytes, the same on every
	// replica) a replica signs a block read with when it reads another
	// replica's block on a caller's behalf. Required with ClusterDSN. It
	// lives in settings, never in the cluster database, which callers'
	// SQL may be able to read.
	ClusterSecret string `json:"cluster_secret" help:"key replicas sign block reads with, at least 32 bytes, the same on every replica"`
	// ClusterAdvertiseURL is the URL the other replicas reach this one at
	// (default: the listener's address, when it names one).
	ClusterAdvertiseURL string `json:"cluster_advertise_url" help:"URL the other replicas forward requests to this one at"`
	// MaxStandbyLag is the replay lag past which a standby (a database's
	// read_urls) takes no reads.
	MaxStandbyLag Duration `json:"max_standby_lag" help:"replay lag past which a standby takes no reads (the primary does)"`
	// MCPBlockThreshold is the encoded size past which a tool result goes
	// to the block store instead of inline.
	MCPBlockThreshold int64 `json:"mcp_block_threshold" help:"bytes of a tool result answered inline; a larger one goes on into blocks"`
	// MCPAnswerChars bounds the text a tool answers a model with: what a
	// model can read. A larger result is cut to the rows that fit, with
	// the way to the rest.
	MCPAnswerChars int `json:"mcp_answer_chars" help:"most characters of text in one tool answer; past it, the rows that fit and the way to the rest"`
	// MCPConfirmExportBytes and MCPElicitDownloadBytes act on a run_sql
	// export the planner puts past them, where the client can ask its
	// person: the person confirms it first, or gets it as a download link
	// instead. 0 turns each off.
	MCPConfirmExportBytes  int64 `json:"mcp_confirm_export_bytes" help:"an export the planner puts past this many bytes is confirmed by the person first (0: never)"`
	MCPElicitDownloadBytes int64 `json:"mcp_elicit_download_bytes" help:"an export the planner puts past this many bytes goes to the person as a download link (0: never)"`
	// MCPResultProfile profiles every result that goes to blocks (per
	// column: counts, bounds, the values of a column with few).
	MCPResultProfile bool `json:"mcp_result_profile" help:"profile each result that goes to blocks (per column: counts, bounds, few values); false saves CPU"`
	// MCPBlockSize is the target size of one block (blocks end on a row).
	MCPBlockSize int64 `json:"mcp_block_size" help:"target bytes of one block (a block ends on a row)"`
	// MCPBlockDir is the spool directory of block files (default
	// DATA_DIR/blocks); it is emptied at start.
	MCPBlockDir string `json:"mcp_block_dir" default:"DATA_DIR/blocks" help:"spool directory of block files, emptied at start (one server per directory)"`
	// MCPBlockTTL is how long a transfer can be fetched.
	MCPBlockTTL Duration `json:"mcp_block_ttl" help:"how long a transfer can be read; then it is deleted"`
	// MCPBlockBudget and MCPBlockBudgetPerSubject bound the bytes of all
	// transfers on disk, and of one subject's.
	MCPBlockBudget           int64  `json:"mcp_block_budget" help:"bytes of all transfers on disk"`
	MCPBlockBudgetPerSubject int64  `json:"mcp_block_budget_per_subject" help:"bytes of one subject's transfers on disk"`
	MCPConfigDir             string `json:"mcp_config_dir" help:"a tools.json here replaces the built-in tools"`
	MCPMaxWorkers            int    `json:"mcp_max_workers" help:"MCP's share of max_workers"`
	MCPTrace                 bool   `json:"mcp_trace" help:"log every MCP message, received and sent (secrets masked, cut at 4 KiB)"`
	// MCPKeepalive is the interval of ": keepalive" comments on SSE streams.
	MCPKeepalive Duration `json:"mcp_keepalive" help:"interval of keepalive comments on SSE streams"`
	// MCPSessionQueue and MCPSessionQueueBytes bound the messages waiting
	// for one slow SSE client, in count and in bytes (0: 4 ×
	// mcp_block_threshold); a client whose queue stays full for
	// mcp_write_timeout is dropped.
	MCPSessionQueue      int   `json:"mcp_session_queue" help:"messages queued per SSE session"`
	MCPSessionQueueBytes int64 `json:"mcp_session_queue_bytes" help:"bytes queued per SSE session (0: 4 × mcp_block_threshold)"`
	// MCPWriteTimeout bounds one write to an SSE client before the session
	// is closed.
	MCPWriteTimeout Duration `json:"mcp_write_timeout" help:"how long an SSE client may stall its stream before it is dropped"`
	// MCPAllowedOrigins lists the browser origins (scheme://host[:port], or
	// "*") allowed on the MCP routes and the other authenticated routes
	// (where the server's own pages, the console, are allowed too);
	// requests with another Origin header get 403. Requests without one
	// (non-browser clients) are allowed.
	MCPAllowedOrigins []string `json:"mcp_allowed_origins" help:"browser origins (comma-separated; * for any) allowed on MCP and API routes"`
	// MCPMaxSessions and MCPMaxSessionsPerSubject bound the open MCP
	// sessions, SSE and Streamable HTTP together.
	MCPMaxSessions           int `json:"mcp_max_sessions" help:"open MCP sessions in all (the least recently used idle one makes room)"`
	MCPMaxSessionsPerSubject int `json:"mcp_max_sessions_per_subject" help:"open MCP sessions of one subject"`
	// MCPSessionIdleAfter is how long a session with no tool call in
	// progress must have gone without activity (a finished tool call; for
	// Streamable HTTP, any request) for operators to see it as idle (the
	// console and its routes). It changes what is shown, never closes a
	// session.
	MCPSessionIdleAfter Duration `json:"mcp_session_idle_after" help:"a session with no tool call running and no activity for this long shows as idle in the console"`

	// MaxWorkers bounds the database work running at once across REST,
	// ingest and MCP tool calls; mcp_max_workers is MCP's share of it.
	MaxWorkers int `json:"max_workers" help:"database work running at once; REST, ingest and MCP share it"`
	// WorkerWait is the longest a request waits for a worker before it is
	// answered unavailable (with retry_after).
	WorkerWait Duration `json:"worker_wait" help:"longest wait for a worker or a database connection"`
	// RateLimitRPS and RateLimitBurst bound each subject's REST requests
	// and MCP tool calls (one token bucket per subject); 0 turns it off.
	RateLimitRPS   float64 `json:"rate_limit_rps" help:"REST requests and MCP tool calls per second per subject (0: off)"`
	RateLimitBurst int     `json:"rate_limit_burst" help:"burst of rate_limit_rps"`
	// MaxQueriesPerSubject bounds one subject's database work running at
	// once; 0 turns it off.
	MaxQueriesPerSubject int `json:"max_queries_per_subject" help:"database work one subject may run at once (0: off)"`
	// MetricsAuth makes GET /metrics require an admin token; false serves
	// it without one.
	MetricsAuth bool `json:"metrics_auth" help:"GET /metrics needs an admin token"`

	StatementTimeout Duration `json:"statement_timeout" help:"longest a query may run"`
	// JobTimeout bounds a job (an export run apart from its call), which
	// statement_timeout does not.
	JobTimeout Duration `json:"job_timeout" help:"longest a job (an export) may run"`
	// MCPJobAfter turns a query tool call still running after it into a
	// job; 0 turns that off. It acts only below statement_timeout.
	MCPJobAfter Duration `json:"mcp_job_after" help:"a query tool call running this long goes on as a job (0: never)"`
	// TailRecheck is how often the newest row of a table a tail waits on
	// is looked at, for rows other programs than lakegate write; 0 turns
	// it off (lakegate's own ingest still wakes tails at once).
	TailRecheck Duration `json:"tail_recheck" help:"how often a table a tail waits on is looked at for rows others write (0: never)"`
	// ResultCacheTTL turns the result cache on: a read repeated within it,
	// by a caller with the same access, is answered from memory, up to
	// ResultCacheBytes in all. lakegate's ingest into a database empties
	// its entries on every replica; rows other programs write show once
	// the TTL has passed.
	ResultCacheTTL   Duration `json:"result_cache_ttl" help:"answer a read repeated within this from memory (0: off)"`
	ResultCacheBytes int64    `json:"result_cache_bytes" help:"memory the result cache may hold (a quarter of it per subject; a result over 1 MiB is not kept)"`
	// GCHeadroom keeps the garbage collector's heap goal at least this
	// many bytes above the live heap (GOGC set after each collection), so
	// that a small heap is not collected every few requests; 0 leaves
	// GOGC as it is. Ignored when the GOGC variable is set. The default
	// (8 MiB) gives the collector room in bytes: the runtime's own least
	// goal, 4 MiB in all, leaves a server whose dependencies keep about
	// 2 MiB live some 2 MiB to fill between collections.
	GCHeadroom int64 `json:"gc_headroom" help:"bytes of garbage the collector may let build up over the live heap (0: GOGC as set)"`
	// MaxJobsPerSubject bounds the jobs one subject has running at once.
	MaxJobsPerSubject int `json:"max_jobs_per_subject" help:"jobs one subject may have running at once"`
	DefaultRowLimit   int `json:"default_row_limit" help:"rows returned when a request names no limit"`
	MaxRowLimit       int `json:"max_row_limit" help:"the largest row limit a request may ask for"`
	// MaxRowBytes bounds one row of a result both as the database sends it
	// and as the server holds it decoded (arrays, numerics, JSON, records):
	// a larger row is refused with a hint to read the value in parts.
	MaxRowBytes  int64 `json:"max_row_bytes" help:"the largest row a query may return, on the wire and decoded"`
	MaxBodyBytes int64 `json:"max_body_bytes" help:"the largest request body"`
	// MaxConnections bounds the open client connections (0: the process's
	// file-descriptor limit less 1,024, for the database, block files and
	// logs); MaxConnectionsPerAddress bounds one remote address's (0 turns
	// it off). At a cap, the connection whose unfinished request started
	// first is closed to make room: an idle or fresh connection, or one
	// whose request headers or body are still arriving, ranked by when that
	// request started, never by its last byte; a connection serving a
	// request it has sent whole (a running query, an event stream) never
	// is. With every connection serving, the new one is answered 503 with
	// Retry-After.
	MaxConnections           int `json:"max_connections" help:"open client connections (0: the open-file limit less 1,024)"`
	MaxConnectionsPerAddress int `json:"max_connections_per_address" help:"open connections of one remote address (0: off)"`
	// HeaderTimeout bounds reading a request's headers, ReadTimeout a whole
	// request (headers and body) from its first byte; a client that has
	// not sent them by then loses its connection. Neither bounds a
	// response, so event streams live as long as they need. IdleTimeout
	// closes a keep-alive connection with no request.
	HeaderTimeout Duration `json:"header_timeout" help:"time a request's headers have to arrive"`
	ReadTimeout   Duration `json:"read_timeout" help:"time a whole request (headers and body) has to arrive"`
	IdleTimeout   Duration `json:"idle_timeout" help:"an idle keep-alive connection is closed after this"`
	// DrainTimeout is how long a shutdown lets requests in flight finish;
	// then they are stopped and answer 503 with Retry-After.
	DrainTimeout Duration `json:"drain_timeout" help:"at shutdown, how long requests in flight may finish"`
	// ShutdownDelay is how long, at shutdown, /ready answers 503 while
	// every route is still served, before the listener closes: a
	// balancer's health checks take the replica out first.
	ShutdownDelay Duration `json:"shutdown_delay" help:"at shutdown, how long /ready answers 503 before the listener closes"`

	// LogFormat is "text" or "json".
	LogFormat string `json:"log_format" help:"text or json (to stderr)"`
	// LogLevel is "debug", "info", "warn" or "error".
	LogLevel string `json:"log_level" help:"debug, info, warn or error"`

	// IgnoreEnv names LAKEGATE_* variables that are no setting and must
	// not stop start-up (see CheckEnviron).
	IgnoreEnv []string `json:"ignore_env" help:"LAKEGATE_* variables of other tools to let pass (names, or prefixes ending in *)"`
}

// Default returns a Config with every default filled in.
func Default() Config {
	return Config{
		Listen:        DefaultListen,
		DataDir:       DefaultDataDir,
		JWTRolesClaim: DefaultRolesClaim,
		// Empty means the same; the default is named for help and README.
		ServerInfoFunctions: ServerInfoAdmin,
		MCPBlockThreshold:   DefaultBlockThreshold,
		MCPAnswerChars:      DefaultAnswerChars,
		MCPResultProfile:    true,
		MCPBlockSize:        DefaultBlockSize,
		MCPBlockTTL:         Duration(DefaultBlockTTL),
		MCPBlockBudget:      DefaultBlockBudget,

		MCPBlockBudgetPerSubject: DefaultBlockBudgetUser,
		MCPMaxWorkers:            DefaultMaxWorkers,
		MCPKeepalive:             Duration(DefaultKeepalive),
		MCPSessionQueue:          DefaultSessionQueue,
		MCPWriteTimeout:          Duration(DefaultWriteTimeout),
		MCPMaxSessions:           DefaultMCPMaxSessions,
		MCPMaxSessionsPerSubject: DefaultMCPMaxSessionsPerSubject,
		MCPSessionIdleAfter:      Duration(DefaultSessionIdleAfter),
		MaxWorkers:               DefaultPoolWorkers,
		WorkerWait:               Duration(DefaultWorkerWait),
		RateLimitRPS:             DefaultRateLimitRPS,
		RateLimitBurst:           DefaultRateLimitBurst,
		MaxQueriesPerSubject:     DefaultMaxQueriesPerSubject,
		MetricsAuth:              true,
		StatementTimeout:         Duration(DefaultStatementTimeout),
		JobTimeout:               Duration(DefaultJobTimeout),
		MCPJobAfter:              Duration(DefaultJobAfter),
		TailRecheck:              Duration(DefaultTailRecheck),
		ResultCacheBytes:         DefaultResultCacheBytes,
		GCHeadroom:               DefaultGCHeadroom,
		MaxJobsPerSubject:        DefaultJobsPerSubject,
		MaxStandbyLag:            Duration(10 * time.Second),
		DefaultRowLimit:          DefaultRowLimit,
		MaxRowLimit:              DefaultMaxRowLimit,
		MaxRowBytes:              DefaultMaxRowBytes,
		MaxBodyBytes:             DefaultMaxBodyBytes,
		MaxConnectionsPerAddress: DefaultMaxConnectionsPerAddress,
		HeaderTimeout:            Duration(DefaultHeaderTimeout),
		ReadTimeout:              Duration(DefaultReadTimeout),
		IdleTimeout:              Duration(DefaultIdleTimeout),
		DrainTimeout:             Duration(DefaultDrainTimeout),
		LogFormat:                "text",
		LogLevel:                 "info",
	}
}

// settingKeys are the config file's keys.
func settingKeys() []string {
	var keys []string
	for _, s := range Settings() {
		keys = append(keys, s.Key)
	}
	return keys
}

// BlockDir is the spool directory of block files.
func (c *Config) BlockDir() string {
	if c.MCPBlockDir != "" {
		return c.MCPBlockDir
	}
	return filepath.Join(c.DataDir, "blocks")
}
