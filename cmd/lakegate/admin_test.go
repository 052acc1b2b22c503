package main

import (
	"encoding/json"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/query"
)

var listeningURL = regexp.MustCompile(`"msg":"lakegate listening","url":"(http://[^"]+)"`)

// serveForTest runs the real server (demo database, secret set) and
// returns its URL; it stops when the test ends.
func serveForTest(t *testing.T) string {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.LogFormat = "json"
	cfg.JWTSecret = secret
	r := startServe(t, cfg)
	return r.await(t, &r.stderr, listeningURL)[1]
}

// signed is a token for sub with role, signed with the tests' secret.
func signed(sub, role string) string { return testutil.Token(secret, sub, role) }

func TestAdminMCP(t *testing.T) {
	base := serveForTest(t)
	admin, reader := signed("ops", lakegate.RoleAdmin), signed("agent", lakegate.RoleReader)
	viaEnv := map[string]string{"LAKEGATE_TOKEN": admin}
	// A port nothing listens on: take one and close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()

	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    []string // in stdout
		wantErr []string // in the error
	}{
		{"status, token from env", viaEnv, []string{"admin", "mcp", "status", "--server", base}, []string{"mcp:", "disabled", "sessions:", "sse 0", "workers:", "tool calls:"}, nil},
		{"enable", viaEnv, []string{"admin", "mcp", "enable", "--server", base}, []string{"enabled since "}, nil},
		{"status when on", viaEnv, []string{"admin", "mcp", "status", "--server", base + "/"}, []string{"enabled since "}, nil},
		{"server from env", map[string]string{"LAKEGATE_TOKEN": admin, "LAKEGATE_SERVER": base}, []string{"admin", "mcp", "status"}, []string{"enabled"}, nil},
		{"disable, token from flag", nil, []string{"admin", "mcp", "disable", "--server", base, "--token", admin}, []string{"disabled"}, nil},
		{"json", viaEnv, []string{"admin", "mcp", "status", "--json", "--server", base}, []string{`"enabled": false`, `"sessions": {`}, nil},
		{"reader is refused", map[string]string{"LAKEGATE_TOKEN": reader}, []string{"admin", "mcp", "enable", "--server", base}, nil, []string{"403", "forbidden"}},
		{"bad token", map[string]string{"LAKEGATE_TOKEN": "not-a-jwt"}, []string{"admin", "mcp", "status", "--server", base}, nil, []string{"GET " + base + "/admin/mcp/status: 401", "auth_error", "the server at " + base + " did not take the token", "make run"}},
		{"no token", nil, []string{"admin", "mcp", "status", "--server", base}, nil, []string{"LAKEGATE_TOKEN"}},
		{"no server", viaEnv, []string{"admin", "mcp", "status", "--server", refused}, nil, []string{"connection refused"}},
		{"bad server URL", viaEnv, []string{"admin", "mcp", "status", "--server", "127.0.0.1:1"}, nil, []string{"--server"}},
		{"unknown route", viaEnv, []string{"admin", "mcp", "status", "--server", base + "/nope"}, nil, []string{"404", "not_found"}},
		{"missing CA file", viaEnv, []string{"admin", "mcp", "status", "--server", base, "--ca-file", "/nonexistent.pem"}, nil, []string{"--ca-file"}},
		{"extra argument", viaEnv, []string{"admin", "mcp", "status", "now", "--server", base}, nil, []string{"now"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := run(t, tt.env, tt.args...)
			for _, tok := range []string{admin, reader, "not-a-jwt"} {
				if strings.Contains(out+errOut, tok) || (err != nil && strings.Contains(err.Error(), tok)) {
					t.Errorf("the output or error holds a token")
				}
			}
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("got %q, want an error", out)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("got %v, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want nil", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("got %q, want it to contain %q", out, w)
				}
			}
		})
	}
	// The JSON form is the server's status itself.
	out, _, err := run(t, viaEnv, "admin", "mcp", "status", "--json", "--server", base)
	var st struct {
		Enabled  *bool          `json:"enabled"`
		Sessions map[string]int `json:"sessions"`
	}
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Enabled == nil || *st.Enabled {
		t.Errorf("--json: got %q %v, want the status with enabled false", out, err)
	}
}

// The binary exits 1 with the server's message on stderr, and 0 on success.
func TestAdminBinaryExitCode(t *testing.T) {
	base := serveForTest(t)
	admin, reader := signed("ops", lakegate.RoleAdmin), signed("agent", lakegate.RoleReader)
	tests := []struct {
		name       string
		token      string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"admin", admin, 0, "enabled since", ""},
		{"reader", reader, 1, "", "lakegate: POST " + base + "/admin/mcp/enable: 403 Forbidden: forbidden: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := lakegateCommand(t, "admin", "mcp", "enable", "--server", base)
			cmd.Env = append(cmd.Env, "LAKEGATE_TOKEN="+tt.token)
			var stdout, stderr testutil.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || !strings.Contains(stdout.String(), tt.wantStdout) || !strings.HasPrefix(stderr.String(), tt.wantStderr) {
				t.Errorf("got exit %d stdout %q stderr %q, want %d %q %q", code, stdout.String(), stderr.String(), tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if strings.Contains(stdout.String()+stderr.String(), tt.token) {
				t.Error("the output holds the token")
			}
		})
	}
}

// TestAdminRollups builds the rollups of a running server's table from the
// command line and lists them.
func TestAdminRollups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	if err := query.CreateDemo(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.LogFormat = "json"
	cfg.JWTSecret = secret
	cfg.Databases = []config.Database{{Name: "demo", URL: "sqlite:" + path, Rollups: []config.Rollup{{Table: "readings", TimeColumn: "ts",
		Keys: []string{"device_id"}, Values: []string{"temperature"}, Resolutions: []string{"1m", "1h"}}}}}
	r := startServe(t, cfg)
	base := r.await(t, &r.stderr, listeningURL)[1]
	env := map[string]string{"LAKEGATE_TOKEN": signed("ops", "admin"), "LAKEGATE_SERVER": base}

	out, _, err := run(t, env, "admin", "rollups", "status")
	if err != nil || !strings.Contains(out, "lakegate_rollup_readings_1h") || !strings.Contains(out, "not built") {
		t.Fatalf("status before: %q %v", out, err)
	}
	out, _, err = run(t, env, "admin", "rollups", "build", "--database", "demo")
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	for _, w := range []string{"building demo.readings", "build demo.readings: done", "(1h ", "1m 5000 rows"} {
		if !strings.Contains(out, w) {
			t.Errorf("build: got %q, want it to contain %q", out, w)
		}
	}
	if strings.Contains(out, "not built") {
		t.Errorf("after the build: %q", out)
	}
	if _, _, err := run(t, env, "admin", "rollups", "build", "--database", "nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown database: got %v", err)
	}
	if _, _, err := run(t, map[string]string{"LAKEGATE_TOKEN": signed("r", "reader"), "LAKEGATE_SERVER": base}, "admin", "rollups", "status"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a reader: got %v, want 403", err)
	}
}
