package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/mcp"
	"github.com/lakegate/lakegate/server"
)

// runMain, set in the environment of a process this test binary starts,
// makes it run main instead of the tests: the tests of the binary run
// this one rather than building another (lakegateCommand).
const runMain = "CMD_LAKEGATE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMain) == "1" {
		main()
		os.Exit(0)
	}
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

// lakegateCommand is the lakegate binary run with args: this test binary,
// running main, with runMain alone in its environment (add to cmd.Env).
func lakegateCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), self, args...)
	cmd.Env = []string{runMain + "=1"}
	return cmd
}

// productionCommand is lakegateCommand for a binary built without build
// tags, whatever tags this test binary has.
func productionCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "lakegate")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = []string{}
	return cmd
}

const secret = "cmd-test-secret-0123456789abcdef0123"

// run executes the CLI with args and env; it returns stdout, stderr and
// the error Execute returned.
func run(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	root := newRoot(&stdout, &stderr, environ)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return stdout.String(), stderr.String(), err
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, err := run(t, nil, args...)
		if err != nil || out != "lakegate dev\n" {
			t.Errorf("%v: got %q, %v, want \"lakegate dev\\n\", nil", args, out, err)
		}
	}
}

// TestMisspelledVariable: a LAKEGATE_* variable that names no setting
// stops serve, stdio and token before anything starts, naming it and the
// setting it may mean; ignore_env lets it pass.
func TestMisspelledVariable(t *testing.T) {
	env := map[string]string{"LAKEGATE_JWT_SECRET": secret, "LAKEGATE_MCP_ENABLD": "true", "LAKEGATE_LISTEN": "127.0.0.1:0"}
	for _, args := range [][]string{{"serve"}, {"stdio", "--sub", "x"}, {"token", "--sub", "x"}} {
		_, _, err := run(t, env, args...)
		if err == nil || !strings.Contains(err.Error(), `LAKEGATE_MCP_ENABLD (did you mean "LAKEGATE_MCP_ENABLED"?)`) {
			t.Errorf("%v: got %v, want the misspelled variable named", args, err)
		}
	}
	env["LAKEGATE_IGNORE_ENV"] = "LAKEGATE_MCP_*"
	if out, _, err := run(t, env, "token", "--sub", "x"); err != nil || out == "" {
		t.Errorf("with ignore_env: got %q, %v, want a token", out, err)
	}
}

func TestToken(t *testing.T) {
	withSecret := map[string]string{"LAKEGATE_JWT_SECRET": secret}
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		sub     string
		role    string
		ttl     time.Duration
		wantErr []string
	}{
		{name: "reader", env: withSecret, args: []string{"token", "--sub", "a", "--role", "reader"}, sub: "a", role: "reader", ttl: time.Hour},
		{name: "default role", env: withSecret, args: []string{"token", "--sub", "b"}, sub: "b", role: "reader", ttl: time.Hour},
		{name: "admin with ttl", env: withSecret, args: []string{"token", "--sub", "ops", "--role", "admin", "--ttl", "8h"}, sub: "ops", role: "admin", ttl: 8 * time.Hour},
		{name: "no secret", args: []string{"token", "--sub", "a"}, wantErr: []string{"LAKEGATE_JWT_SECRET"}},
		{name: "short secret", env: map[string]string{"LAKEGATE_JWT_SECRET": "short"}, args: []string{"token", "--sub", "a"}, wantErr: []string{"32"}},
		{name: "unknown role", env: withSecret, args: []string{"token", "--sub", "a", "--role", "nope"}, wantErr: []string{`"nope"`, "reader", "writer", "admin"}},
		{name: "no sub", env: withSecret, args: []string{"token"}, wantErr: []string{"sub"}},
		{name: "negative ttl", env: withSecret, args: []string{"token", "--sub", "a", "--ttl", "-1h"}, wantErr: []string{"ttl"}},
		{name: "bad env", env: map[string]string{"LAKEGATE_JWT_SECRET": secret, "LAKEGATE_MCP_ENABLED": "perhaps"}, args: []string{"token", "--sub", "a"}, wantErr: []string{"LAKEGATE_MCP_ENABLED"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := run(t, tt.env, tt.args...)
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
			var claims server.Claims
			_, err = jwt.ParseWithClaims(strings.TrimSpace(out), &claims, func(*jwt.Token) (any, error) { return []byte(secret), nil },
				jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
			if err != nil {
				t.Fatalf("parse %q: %v", out, err)
			}
			if claims.Subject != tt.sub || claims.Role != tt.role {
				t.Errorf("got sub %q role %q, want %q %q", claims.Subject, claims.Role, tt.sub, tt.role)
			}
			if left := time.Until(claims.ExpiresAt.Time); left > tt.ttl || left < tt.ttl-time.Minute {
				t.Errorf("got exp in %v, want about %v", left, tt.ttl)
			}
		})
	}
}

func TestServeConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"listen": "127.0.0.1:0", "databse": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"unknown key", nil, []string{"serve", "--config", bad}, `"databse"`},
		{"missing file", nil, []string{"serve", "--config", filepath.Join(dir, "missing.json")}, "no such file"},
		{"bad env", map[string]string{"LAKEGATE_LOG_LEVEL": "loud"}, []string{"serve"}, "log_level"},
		{"extra argument", nil, []string{"serve", "now"}, "now"},
		{"LAKEGATE_CONFIG", map[string]string{"LAKEGATE_CONFIG": filepath.Join(dir, "gone.yaml")}, []string{"serve"}, "gone.yaml: no such file"},
		{"--listen", nil, []string{"serve", "--listen", "nohost"}, `listen "nohost": want host:port`},
		{"--listen outranks the environment", map[string]string{"LAKEGATE_LISTEN": "127.0.0.1:0"}, []string{"serve", "--listen", "bad"}, `listen "bad"`},
		{"stdio has no --listen", nil, []string{"stdio", "--listen", "127.0.0.1:0"}, "unknown flag: --listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := run(t, tt.env, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestServeHelp: serve --help lists every setting with its environment
// variable and default, and the --listen flag.
func TestServeHelp(t *testing.T) {
	out, _, err := run(t, nil, "serve", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--listen", "LAKEGATE_CONFIG", "--config"} {
		if !strings.Contains(out, want) {
			t.Errorf("got %s, want it to contain %q", out, want)
		}
	}
	for _, s := range config.Settings() {
		def := s.Default
		if def == "" {
			def = "none"
		}
		want := "  " + s.Key + ", " + s.Env + " (default: " + def + ")\n      " + s.Help + "\n"
		if !strings.Contains(out, want) {
			t.Errorf("serve --help: no %q", want)
		}
	}
}

// running is serve running in a test: what it writes, and its end.
type running struct {
	stdout, stderr testutil.Buffer
	done           chan error // serve's result
	// stop cancels serve and returns its result (15 s at most).
	stop func() error
}

// startServe runs serve with cfg; the test's cleanup stops it and fails
// the test if serve returns an error.
func startServe(t *testing.T, cfg config.Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{done: make(chan error, 1)}
	go func() { r.done <- serve(ctx, cfg, &r.stdout, &r.stderr) }()
	r.stop = sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-r.done:
			return err
		case <-time.After(15 * time.Second):
			return errors.New("serve did not return within 15s of its cancel")
		}
	})
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return r
}

// await waits (20 s at most) until re matches what serve wrote to out,
// and returns the match; serve returning first fails the test.
func (r *running) await(t *testing.T, out *testutil.Buffer, re *regexp.Regexp) []string {
	t.Helper()
	var (
		m     []string
		ended bool
		err   error
	)
	found := testutil.Within(20*time.Second, func() bool {
		if m = re.FindStringSubmatch(out.String()); m != nil {
			return true
		}
		select {
		case err = <-r.done:
			r.done <- err // for stop
			ended = true
			return true
		default:
			return false
		}
	})
	switch {
	case m != nil:
		return m
	case ended:
		t.Fatalf("serve returned early: %v; stderr: %s", err, r.stderr.String())
	case !found:
		t.Fatalf("nothing matching %s within 20s; stdout: %s; stderr: %s", re, r.stdout.String(), r.stderr.String())
	}
	return nil
}

var (
	connectLine = regexp.MustCompile(`(?m)^\s*claude mcp add --transport sse lakegate-sse (http://127\.0\.0\.1:\d+)/mcp/sse --header "Authorization: Bearer ([^"]+)"`)
	httpLine    = regexp.MustCompile(`(?m)^\s*claude mcp add --transport http lakegate (http://127\.0\.0\.1:\d+)/mcp --header "Authorization: Bearer ([^"]+)"`)
	stdioLine   = regexp.MustCompile(`(?m)^\s*claude mcp add lakegate-stdio -e LAKEGATE_DATA_DIR=(\S+) -- (\S+) stdio$`)
	adminLine   = regexp.MustCompile(`(?m)^\s*admin token:\s+(\S+)$`)
	readerLine  = regexp.MustCompile(`(?m)^\s*reader token:\s+(\S+)$`)
)

func TestServeDemo(t *testing.T) {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.LogFormat = "json"
	r := startServe(t, cfg)
	m := r.await(t, &r.stdout, connectLine)
	base, tok := m[1], m[2]
	out := r.stdout.String()
	if r := readerLine.FindStringSubmatch(out); r == nil || r[1] != tok {
		t.Errorf("got reader line %v, want the token of the connect line", r)
	}
	a := adminLine.FindStringSubmatch(out)
	if a == nil {
		t.Fatalf("got no admin token in %s", out)
	}
	// One name per transport, so that all of them can be added.
	if h := httpLine.FindStringSubmatch(out); h == nil || h[1] != base || h[2] != tok {
		t.Errorf("got http line %v, want lakegate at %s/mcp with the reader token", h, base)
	}
	if s := stdioLine.FindStringSubmatch(out); s == nil || !filepath.IsAbs(s[1]) || !filepath.IsAbs(s[2]) {
		t.Errorf("got stdio line %v in %s, want lakegate-stdio with absolute paths", s, out)
	}
	// MCP is off by default: the help says so before the connect lines.
	off := strings.Index(out, "MCP is off: turn it on")
	if off < 0 || off > strings.Index(out, "claude mcp add") ||
		!strings.Contains(out, "LAKEGATE_TOKEN="+a[1]+" lakegate admin mcp enable --server "+base) {
		t.Errorf("got %s, want MCP is off with the admin enable line before the connect lines", out)
	}
	if !strings.Contains(out, "export LAKEGATE_JWT_SECRET") {
		t.Errorf("got %s, want how to mint more tokens", out)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "demo.db")); err != nil {
		t.Errorf("demo database: %v", err)
	}
	if !strings.Contains(r.stderr.String(), `"msg":"lakegate listening"`) {
		t.Errorf("got stderr %s, want a JSON listening line", r.stderr.String())
	}

	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	get := func(path, tok string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}
	stale := testutil.Token("secret-of-an-earlier-run-0123456789abcdef", "alice", lakegate.RoleReader)
	tests := []struct {
		name, path, tok string
		want            int
		contains        string
	}{
		{"reader lists databases", "/rest/databases", tok, 200, `"name":"demo"`},
		{"reader is not admin", "/admin/mcp/status", tok, 403, "forbidden"},
		{"admin status", "/admin/mcp/status", a[1], 200, `"enabled":false`},
		// A token of an earlier run: its secret is gone with that run.
		{"a token of an earlier run", "/rest/databases", stale, 401, "a secret made for this run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(tt.path, tt.tok)
			if code != tt.want || !bytes.Contains(body, []byte(tt.contains)) {
				t.Errorf("got %d %s, want %d containing %s", code, body, tt.want, tt.contains)
			}
		})
	}

	if err := r.stop(); err != nil {
		t.Errorf("serve: got %v, want nil", err)
	}
}

func TestServeErrors(t *testing.T) {
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	busy := hold.Addr().String()
	ln := config.Default()
	ln.Listen = "127.0.0.1:0"
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(*config.Config)
		want   string
	}{
		{"data dir is a file", func(c *config.Config) { c.DataDir = file }, "data dir"},
		{"missing sqlite file", func(c *config.Config) {
			c.Databases = []config.Database{{Name: "x", URL: "sqlite:" + filepath.Join(t.TempDir(), "none.db")}}
		}, `"x"`},
		{"bad listen", func(c *config.Config) { c.Listen = "256.0.0.1:0"; c.DataDir = t.TempDir() }, "listen on"},
		{"address in use", func(c *config.Config) { c.Listen = busy; c.DataDir = t.TempDir() },
			"listen on " + busy + ": address already in use (another process holds it): choose another address with --listen, LAKEGATE_LISTEN or listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ln
			tt.change(&cfg)
			var stdout, stderr bytes.Buffer
			err := serve(t.Context(), cfg, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestBinary(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
		production bool // a build without the conformance tag
	}{
		{"version", []string{"version"}, 0, "lakegate dev\n", "", false},
		{"missing config", []string{"serve", "--config", "missing.json"}, 1, "", "missing.json: no such file", false},
		{"unknown command", []string{"frobnicate"}, 1, "", "unknown command", false},
		// The production build has no conformance fixtures (mcp/conformance.go
		// is behind the conformance build tag).
		{"conformance without the tag", []string{"serve", "--conformance"}, 1, "",
			"this binary was built without the conformance fixtures; build with -tags conformance", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := lakegateCommand(t, tt.args...)
			if tt.production && mcp.ConformanceFixtures {
				// This test binary has the fixtures: build one without.
				cmd = productionCommand(t, tt.args...)
			}
			cmd.Dir = t.TempDir()
			cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "HOME="+t.TempDir())
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || stdout.String() != tt.wantStdout {
				t.Errorf("got exit %d stdout %q, want %d %q", code, stdout.String(), tt.wantCode, tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) || (tt.wantStderr != "" && !strings.HasPrefix(stderr.String(), "lakegate: ")) {
				t.Errorf("got stderr %q, want lakegate: ...%s", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestConnectHelp(t *testing.T) {
	cfg := config.Default()
	cfg.JWTSecret = secret
	for _, tc := range []struct {
		name       string
		ci         connectInfo
		off, stdio bool
	}{
		{"MCP on, demo", connectInfo{base: "http://127.0.0.1:1", mcpOn: true, demo: true}, false, true},
		{"MCP off", connectInfo{base: "http://127.0.0.1:1", demo: true}, true, true},
		{"own databases: no stdio line", connectInfo{base: "http://127.0.0.1:1", mcpOn: true}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printConnectHelp(&b, cfg, tc.ci); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if got := strings.Contains(out, "MCP is off"); got != tc.off {
				t.Errorf("MCP is off: got %v, want %v in %s", got, tc.off, out)
			}
			if got := stdioLine.MatchString(out); got != tc.stdio {
				t.Errorf("stdio line: got %v, want %v in %s", got, tc.stdio, out)
			}
			if !httpLine.MatchString(out) || !connectLine.MatchString(out) {
				t.Errorf("got %s, want the http and sse lines", out)
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"/usr/bin/lakegate": "/usr/bin/lakegate", "/my dir/x": "'/my dir/x'", "it's": `'it'\''s'`, "": "''"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q): got %s, want %s", in, got, want)
		}
	}
}

// Cursors are signed with a key derived from the HS256 secret, so that
// they outlive a restart and work on every server sharing the secret;
// without a secret the engine makes a key of its own.
func TestCursorKey(t *testing.T) {
	a, b := config.Default(), config.Default()
	a.JWTSecret, b.JWTSecret = strings.Repeat("a", 32), strings.Repeat("b", 32)
	if k := cursorKey(a); len(k) != 32 || !bytes.Equal(k, cursorKey(a)) || bytes.Equal(k, cursorKey(b)) {
		t.Errorf("cursor keys: want 32 bytes, the same for a secret, different between secrets")
	}
	if bytes.Contains(cursorKey(a), []byte(a.JWTSecret)) {
		t.Error("the cursor key holds the secret")
	}
	if cursorKey(config.Default()) != nil {
		t.Error("no secret: want no key (the engine makes its own)")
	}
}

// TestOtherPort: the port suggested for an address in use is one that is
// free, not merely the next one.
func TestOtherPort(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	first, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, first)
	port := first.Addr().(*net.TCPAddr).Port
	if port >= 65530 {
		t.Skip("the port given is too close to the end of the range")
	}
	if next, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+1)); err == nil {
		held = append(held, next)
	}
	taken := map[int]bool{}
	for _, ln := range held {
		taken[ln.Addr().(*net.TCPAddr).Port] = true
	}
	if got := otherPort(first.Addr().String()); got <= port || taken[got] {
		t.Errorf("got %d beside the held ports %v, want a port past %d that is free", got, taken, port)
	}
}
