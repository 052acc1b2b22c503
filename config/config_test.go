package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// env returns a getenv backed by m, so tests never touch the process
// environment.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeFile writes content to name in a fresh temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const secret = "0123456789abcdef0123456789abcdef" // 32 bytes

func TestLoadDefaults(t *testing.T) {
	got, err := Load("", env(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	def := Default()
	if err := def.Validate(); err != nil {
		t.Errorf("Default().Validate() = %v, want nil", err)
	}
}

func TestLoadFile(t *testing.T) {
	want := Default()
	want.Listen = "0.0.0.0:9000"
	want.Databases = []Database{{Name: "iot", URL: "postgres://h/iot"}}
	want.JWTSecret = secret
	want.MCPEnabled = true
	want.MCPKeepalive = Duration(5 * time.Second)
	want.MCPWriteTimeout = Duration(1500 * time.Millisecond)
	want.MaxBodyBytes = 4096
	want.LogFormat = "json"

	tests := []struct {
		name, file, content string
	}{
		{"json", "c.json", `{"listen": "0.0.0.0:9000", "databases": [{"name": "iot", "url": "postgres://h/iot"}],
			"jwt_secret": "` + secret + `", "mcp_enabled": true, "mcp_keepalive": "5s",
			"mcp_write_timeout": 1.5, "max_body_bytes": 4096, "log_format": "json"}`},
		{"yaml", "c.yaml", "listen: 0.0.0.0:9000\ndatabases:\n  - name: iot\n    url: postgres://h/iot\n" +
			"jwt_secret: " + secret + "\nmcp_enabled: true\nmcp_keepalive: 5s\nmcp_write_timeout: 1.5\n" +
			"max_body_bytes: 4096\nlog_format: json\n"},
		{"yml", "c.yml", "listen: 0.0.0.0:9000\ndatabases: [{name: iot, url: 'postgres://h/iot'}]\n" +
			"jwt_secret: " + secret + "\nmcp_enabled: true\nmcp_keepalive: 5s\nmcp_write_timeout: 1.5\n" +
			"max_body_bytes: 4096\nlog_format: json\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Load(writeFile(t, tt.file, tt.content), env(nil))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
	t.Run("empty yaml keeps defaults", func(t *testing.T) {
		got, err := Load(writeFile(t, "e.yaml", "# nothing\n"), env(nil))
		if err != nil || !reflect.DeepEqual(got, Default()) {
			t.Errorf("got %+v, %v, want defaults, nil", got, err)
		}
	})
}

func TestLoadEnvOverridesFile(t *testing.T) {
	file := writeFile(t, "c.json", `{"listen": "127.0.0.1:1", "log_level": "debug", "mcp_max_workers": 3,
		"databases": [{"name": "f", "url": "sqlite:f.db"}]}`)
	got, err := Load(file, env(map[string]string{
		"LAKEGATE_LISTEN":              "127.0.0.1:2",
		"LAKEGATE_DATA_DIR":            "/tmp/x",
		"LAKEGATE_JWT_SECRET":          secret,
		"LAKEGATE_MCP_CONFIG_DIR":      "/etc/lg",
		"LAKEGATE_LOG_FORMAT":          "json",
		"LAKEGATE_LOG_LEVEL":           "warn",
		"LAKEGATE_MCP_ENABLED":         "true",
		"LAKEGATE_MCP_TRACE":           "true",
		"LAKEGATE_MCP_KEEPALIVE":       "2s",
		"LAKEGATE_STATEMENT_TIMEOUT":   "1m",
		"LAKEGATE_MCP_MAX_WORKERS":     "7",
		"LAKEGATE_DEFAULT_ROW_LIMIT":   "5",
		"LAKEGATE_MAX_ROW_LIMIT":       "50",
		"LAKEGATE_MCP_BLOCK_THRESHOLD": "2048",
		"LAKEGATE_DATABASE_URL":        "postgres://h/iot",
	}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Default()
	want.Listen, want.DataDir, want.JWTSecret, want.MCPConfigDir = "127.0.0.1:2", "/tmp/x", secret, "/etc/lg"
	want.LogFormat, want.LogLevel, want.MCPEnabled, want.MCPTrace = "json", "warn", true, true
	want.MCPKeepalive, want.StatementTimeout = Duration(2*time.Second), Duration(time.Minute)
	want.MCPMaxWorkers, want.DefaultRowLimit, want.MaxRowLimit, want.MCPBlockThreshold = 7, 5, 50, 2048
	want.Databases = []Database{{Name: "iot", URL: "postgres://h/iot"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, file, content string
		env                 map[string]string
		want                []string // substrings of the error
	}{
		{"missing file", "", "", nil, []string{"no such file"}},
		{"unknown json key", "c.json", `{"listen": "127.0.0.1:1", "lisen": "x"}`, nil, []string{`"lisen"`}},
		{"unknown yaml key", "c.yaml", "listen: 127.0.0.1:1\nmcp_enabeld: true\n", nil, []string{`"mcp_enabeld"`}},
		{"json syntax error", "c.json", "{\n  \"listen\": \"x\",\n  \"log_level\" \"info\"\n}", nil, []string{"line 3"}},
		{"yaml syntax error", "c.yaml", "listen: [\n", nil, []string{"c.yaml"}},
		{"wrong type", "c.json", "{\n\"mcp_max_workers\": \"ten\"\n}", nil, []string{"mcp_max_workers", "line 2"}},
		{"wrong nested type", "c.json", `{"databases": [{"name": 1, "url": "sqlite:x"}]}`, nil, []string{"databases.name"}},
		{"bad duration in file", "c.json", `{"mcp_keepalive": "abc"}`, nil, []string{`"abc"`, `"mcp_keepalive"`, "line 1", "a duration"}},
		{"bad duration in yaml names no line", "c.yaml", "listen: 127.0.0.1:1\nmcp_keepalive: soon\n", nil, []string{`"mcp_keepalive"`, `"soon"`}},
		{"invalid after load", "c.json", `{"log_level": "loud"}`, nil, []string{"log_level"}},
		{"bad bool", "", "", map[string]string{"LAKEGATE_MCP_ENABLED": "yep"}, []string{"LAKEGATE_MCP_ENABLED", "yep"}},
		{"bad trace bool", "", "", map[string]string{"LAKEGATE_MCP_TRACE": "2"}, []string{"LAKEGATE_MCP_TRACE"}},
		{"bad int", "", "", map[string]string{"LAKEGATE_MAX_ROW_LIMIT": "1e3"}, []string{"LAKEGATE_MAX_ROW_LIMIT"}},
		{"bad block threshold", "", "", map[string]string{"LAKEGATE_MCP_BLOCK_THRESHOLD": "10MB"}, []string{"LAKEGATE_MCP_BLOCK_THRESHOLD"}},
		{"bad duration", "", "", map[string]string{"LAKEGATE_STATEMENT_TIMEOUT": "30 parsecs"}, []string{"LAKEGATE_STATEMENT_TIMEOUT", "want a duration like 30s or a number of seconds"}},
		{"bad bool", "", "", map[string]string{"LAKEGATE_MCP_TRACE": "1"}, []string{"LAKEGATE_MCP_TRACE", "want true or false"}},
		{"bad bool in the file", "c.yaml", "mcp_trace: 1\n", nil, []string{"line 1", "mcp_trace", "want true or false"}},
		{"bad duration in the file", "c.json", "{\n  \"statement_timeout\": \"30 parsecs\"\n}", nil, []string{"line 2", "statement_timeout", "want a duration like 30s or a number of seconds"}},
		{"misspelled key in YAML", "c.yaml", "listen: 127.0.0.1:1\nmcp_enabld: true\n", nil, []string{"line 2", "unknown setting \"mcp_enabld\"", "did you mean \"mcp_enabled\"?"}},
		{"misspelled key in JSON", "c.json", "{\"listen\": \"127.0.0.1:1\",\n \"statement_timout\": \"5s\"}", nil, []string{"line 2", "did you mean \"statement_timeout\"?"}},
		{"bad keepalive", "", "", map[string]string{"LAKEGATE_MCP_KEEPALIVE": "soon"}, []string{"LAKEGATE_MCP_KEEPALIVE"}},
		{"bad databases", "", "", map[string]string{"LAKEGATE_DATABASES": "nourl"}, []string{"LAKEGATE_DATABASES", "entry 1"}},
		{"bad database url", "", "", map[string]string{"LAKEGATE_DATABASE_URL": "postgres://h/"}, []string{"LAKEGATE_DATABASE_URL"}},
		{"short secret", "", "", map[string]string{"LAKEGATE_JWT_SECRET": "short"}, []string{"32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var file string
			switch {
			case tt.name == "missing file":
				file = filepath.Join(t.TempDir(), "missing.json")
			case tt.file != "":
				file = writeFile(t, tt.file, tt.content)
			}
			_, err := Load(file, env(tt.env))
			if err == nil {
				t.Fatalf("got nil error, want one containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   []string
	}{
		{"short secret", func(c *Config) { c.JWTSecret = "abc" }, []string{"jwt_secret", "32"}},
		{"cluster without a secret", func(c *Config) { c.ClusterDSN = "postgres://h/c" }, []string{"cluster_dsn needs cluster_secret", "openssl rand -hex 32"}},
		{"short cluster secret", func(c *Config) {
			c.ClusterDSN, c.ClusterSecret = "postgres://h/c", "abc"
		}, []string{"cluster_secret is 3 bytes", "32"}},
		{"cluster secret is the jwt secret", func(c *Config) {
			c.ClusterDSN, c.ClusterSecret, c.JWTSecret = "postgres://h/c", secret, secret
		}, []string{"cluster_secret equals jwt_secret"}},
		{"bad listen", func(c *Config) { c.Listen = "localhost" }, []string{"listen"}},
		{"duplicate names", func(c *Config) {
			c.Databases = []Database{{Name: "a", URL: "sqlite:a.db"}, {Name: "a", URL: "sqlite:b.db"}}
		}, []string{"databases[1]", "used twice"}},
		{"bad scheme", func(c *Config) { c.Databases = []Database{{Name: "a", URL: "mysql://h/a"}} }, []string{"databases[0]", "postgres://"}},
		{"empty sqlite path", func(c *Config) { c.Databases = []Database{{Name: "a", URL: "sqlite:"}} }, []string{"databases[0]"}},
		{"bad name", func(c *Config) { c.Databases = []Database{{Name: "1x", URL: "sqlite:a.db"}} }, []string{`name "1x"`}},
		{"name with space", func(c *Config) { c.Databases = []Database{{Name: "a b", URL: "sqlite:a.db"}} }, []string{`name "a b"`}},
		{"empty name", func(c *Config) { c.Databases = []Database{{Name: "", URL: "sqlite:a.db"}} }, []string{"databases[0]"}},
		{"long name", func(c *Config) { c.Databases = []Database{{Name: strings.Repeat("a", 64), URL: "sqlite:a.db"}} }, []string{"databases[0]"}},
		{"standby of sqlite", func(c *Config) {
			c.Databases = []Database{{Name: "a", URL: "sqlite:a.db", ReadURLs: []string{"sqlite:b.db"}}}
		}, []string{"databases[0]", "read_urls"}},
		{"standby scheme", func(c *Config) {
			c.Databases = []Database{{Name: "a", URL: "postgres://h/a", ReadURLs: []string{"mysql://h/a"}}}
		}, []string{"databases[0]", "read_urls[0]"}},
		{"block threshold", func(c *Config) { c.MCPBlockThreshold = 1023 }, []string{"mcp_block_threshold"}},
		{"workers", func(c *Config) { c.MCPMaxWorkers = 0 }, []string{"mcp_max_workers"}},
		{"keepalive", func(c *Config) { c.MCPKeepalive = Duration(time.Millisecond) }, []string{"mcp_keepalive"}},
		{"session queue", func(c *Config) { c.MCPSessionQueue = 0 }, []string{"mcp_session_queue"}},
		{"write timeout", func(c *Config) { c.MCPWriteTimeout = Duration(time.Millisecond) }, []string{"mcp_write_timeout"}},
		{"session idle after", func(c *Config) { c.MCPSessionIdleAfter = Duration(time.Millisecond) }, []string{"mcp_session_idle_after"}},
		{"statement timeout", func(c *Config) { c.StatementTimeout = 0 }, []string{"statement_timeout"}},
		{"default row limit", func(c *Config) { c.DefaultRowLimit = 0 }, []string{"default_row_limit"}},
		{"max below default", func(c *Config) { c.MaxRowLimit = c.DefaultRowLimit - 1 }, []string{"max_row_limit"}},
		{"body size", func(c *Config) { c.MaxBodyBytes = 1000 }, []string{"max_body_bytes"}},
		{"log format", func(c *Config) { c.LogFormat = "xml" }, []string{"log_format"}},
		{"log level", func(c *Config) { c.LogLevel = "trace" }, []string{"log_level"}},
		{"all at once", func(c *Config) {
			c.Listen, c.MCPMaxWorkers, c.LogFormat, c.LogLevel, c.JWTSecret = "nope", -1, "xml", "loud", "x"
		}, []string{"listen", "mcp_max_workers", "log_format", "log_level", "jwt_secret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.change(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("got nil, want an error mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want it to contain %q", err, w)
				}
			}
		})
	}
	t.Run("cluster with a secret", func(t *testing.T) {
		c := Default()
		c.ClusterDSN, c.ClusterSecret = "postgres://h/c", strings.Repeat("k", MinSecretBytes)
		if err := c.Validate(); err != nil {
			t.Errorf("got %v, want nil", err)
		}
	})
	t.Run("good databases", func(t *testing.T) {
		c := Default()
		c.JWTSecret = secret
		c.Databases = []Database{{Name: "a", URL: "postgres://h/a"}, {Name: "b-2", URL: "postgresql://h/b"}, {Name: "c_3", URL: "sqlite:c.db"}}
		if err := c.Validate(); err != nil {
			t.Errorf("got %v, want nil", err)
		}
	})
}

func TestParseDatabases(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Database
		wantErr string
	}{
		{name: "two", in: "a=postgres://u:p@h/db1,b=sqlite:./x.db",
			want: []Database{{Name: "a", URL: "postgres://u:p@h/db1"}, {Name: "b", URL: "sqlite:./x.db"}}},
		{name: "spaces and empty items", in: " a = sqlite:a.db , ,b=sqlite:b.db,",
			want: []Database{{Name: "a", URL: "sqlite:a.db"}, {Name: "b", URL: "sqlite:b.db"}}},
		{name: "url keeps its =", in: "a=postgres://h/db?sslmode=disable",
			want: []Database{{Name: "a", URL: "postgres://h/db?sslmode=disable"}}},
		{name: "no =", in: "a=sqlite:a.db,postgres://u:secret@h/db2", wantErr: "want name=url"},
		{name: "empty name", in: "=sqlite:a.db", wantErr: "want name=url"},
		{name: "empty url", in: "a=", wantErr: "want name=url"},
		{name: "colon typo", in: "a:postgres://u:secret@h/db", wantErr: "want name=url"},
		{name: "empty name with password", in: "=postgres://u:secret@h/db", wantErr: "want name=url"},
		{name: "JSON with standbys", in: ` [{"name": "iot", "url": "postgres://p/iot", "read_urls": ["postgres://s1/iot", "postgres://s2/iot"]}]`,
			want: []Database{{Name: "iot", URL: "postgres://p/iot", ReadURLs: []string{"postgres://s1/iot", "postgres://s2/iot"}}}},
		{name: "bad JSON keeps its secret", in: `[{"name": "iot", "url": "postgres://u:secret@p/iot"`, wantErr: "JSON array"},
		{name: "unknown JSON field", in: `[{"name": "iot", "uri": "postgres://u:secret@p/iot"}]`, wantErr: "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDatabases(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("got %v, want no password in the message", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, %v, want %v, nil", got, err, tt.want)
			}
		})
	}
}

func TestNameFromURL(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "postgres://h/iot", want: "iot"},
		{in: "postgresql://u:p@h:5432/sales?sslmode=disable", want: "sales"},
		{in: "sqlite:./data/demo.db", want: "demo"},
		{in: "sqlite:///abs/path/lake.sqlite", want: "lake"},
		{in: "postgres://h/", wantErr: true},
		{in: "postgres://u:secret@h", wantErr: true},
		{in: "sqlite:", wantErr: true},
		{in: "postgres://h:badport/x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := NameFromURL(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %q, %v, want %q, error %v", got, err, tt.want, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("got %v, want no password in the message", err)
			}
		})
	}
}

func TestDatabaseDriver(t *testing.T) {
	tests := []struct {
		url, driver, path string
	}{
		{"sqlite:./a.db", "sqlite", "./a.db"},
		{"sqlite:///tmp/a.db", "sqlite", "/tmp/a.db"},
		{"postgres://h/a", "postgres", "postgres://h/a"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			d := Database{Name: "x", URL: tt.url}
			if got := d.Driver(); got != tt.driver {
				t.Errorf("Driver: got %v, want %v", got, tt.driver)
			}
			if d.Driver() == "sqlite" {
				if got := d.SQLitePath(); got != tt.path {
					t.Errorf("SQLitePath: got %v, want %v", got, tt.path)
				}
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    Duration
		wantErr bool
	}{
		{in: `"30s"`, want: Duration(30 * time.Second)},
		{in: `"1m30s"`, want: Duration(90 * time.Second)},
		{in: `2.5`, want: Duration(2500 * time.Millisecond)},
		{in: `0`, want: 0},
		{in: `"abc"`, wantErr: true},
		{in: `true`, wantErr: true},
		{in: `[1]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var got Duration
			err := json.Unmarshal([]byte(tt.in), &got)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("got %v, %v, want %v, error %v", time.Duration(got), err, time.Duration(tt.want), tt.wantErr)
			}
		})
	}
	t.Run("marshal round trip", func(t *testing.T) {
		b, err := json.Marshal(Duration(1500 * time.Millisecond))
		if err != nil || string(b) != `"1.5s"` {
			t.Fatalf("got %s, %v, want \"1.5s\", nil", b, err)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back != Duration(1500*time.Millisecond) {
			t.Errorf("got %v, %v, want 1.5s, nil", time.Duration(back), err)
		}
	})
}
