package deploy

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/config"
)

// repoRoot is the repository holding this module.
const repoRoot = ".."

// checkNames fails the test when env holds a LAKEGATE_* variable that
// names no setting: lakegate serve would refuse to start (CheckEnviron).
func checkNames(t *testing.T, where string, env map[string]string) {
	t.Helper()
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	if err := config.CheckEnviron(environ, nil); err != nil {
		t.Errorf("%s: %v", where, err)
	}
}

// loadConfig runs the server's own loader on a config file (may be "")
// and the environment env, as lakegate serve would at start.
func loadConfig(t *testing.T, where, file string, env map[string]string) config.Config {
	t.Helper()
	checkNames(t, where, env)
	cfg, err := config.Load(file, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("%s: lakegate would not start: %v", where, err)
	}
	return cfg
}

// tool returns the path of a program the test needs: the variable's
// value, else the program on PATH; none skips the test with why.
func tool(t *testing.T, variable, name, why string) string {
	t.Helper()
	if p := os.Getenv(variable); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", variable, p, err)
		}
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found (%s unset): %s", name, variable, why)
	}
	return p
}

// output runs a command and returns its standard output; a failure ends
// the test with what it printed.
func output(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// configView is what the drain and data checks read of a configuration.
type configView struct {
	DataDir                     string
	ShutdownDelay, DrainTimeout time.Duration
	ReadURLs                    int // standbys of all databases
}

// checkLogin fails the test unless the PostgreSQL URL u connects as the
// least-privileged login role lakegate (never a superuser).
func checkLogin(t *testing.T, where, u string) {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if p.User.Username() != "lakegate" {
		t.Errorf("%s connects as %q, want the login role lakegate", where, p.User.Username())
	}
}
