package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
)

// claudeCodeVersion is the Claude Code release TestClaudeCode installs
// (the newest on npm when it was pinned). Raise it to check a newer one.
const claudeCodeVersion = "2.1.330"

// TestClaudeCode: Claude Code, installed from npm into the test's scratch
// directory, adds lakegate over Streamable HTTP, legacy SSE and stdio the
// way README says, and its health check (claude mcp list: no model, no
// network) reports each connected, and a server added with a token signed
// by another secret failed; with haproxy installed, also lakegate over both
// HTTP transports through haproxy in front of two replicas. A tool group of
// an operator's tools.json connects at /mcp/{group}, and every server still
// connects after the tools are reloaded. Skipped without npm.
//
// The install (about 6 s here, a 380 MB native binary; npm's cache is
// shared, so only the first run downloads) stays in the test: js-deps
// reinstalls integration/js on every make test, so caching it there would
// cost the same on every run and put Claude Code into every Node test's
// tree; here it runs only with this test, under a HOME of its own.
func TestClaudeCode(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not found: Claude Code is installed from npm")
	}
	if testing.Short() {
		t.Skip("installs Claude Code from npm")
	}
	claude := installClaudeCode(t, npm)
	bin := buildBinary(t)
	tools := t.TempDir()
	putTools(t, tools, groupTools(t, "list_tables", "describe_table"))
	p := startProc(t, bin, "LAKEGATE_MCP_CONFIG_DIR="+tools)

	scratch := t.TempDir()
	home, project := filepath.Join(scratch, "home"), filepath.Join(scratch, "project")
	for _, d := range []string{home, project} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A HOME of its own: Claude Code keeps its servers in ~/.claude.json.
	env := []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, claude, args...)
		cmd.Dir, cmd.Env = project, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	reader := "Authorization: Bearer " + token("claude-code", "reader")
	forged := testutil.Token("another-secret-0123456789abcdef-0123456789", "claude-code", "reader")
	bad := "Authorization: Bearer " + forged
	// The names README gives, so all three can be added side by side.
	run("mcp", "add", "--transport", "http", "lakegate", p.base+"/mcp", "--header", reader)
	run("mcp", "add", "--transport", "sse", "lakegate-sse", p.base+"/mcp/sse", "--header", reader)
	run("mcp", "add", "lakegate-stdio", "-e", "LAKEGATE_DATABASES=iot="+appURL, "-e", "LAKEGATE_QUERY_ROLE="+pgtest.QueryRole, "-e", "LAKEGATE_LOG_LEVEL=warn", "--", bin, "stdio")
	run("mcp", "add", "--transport", "http", "bad-token-http", p.base+"/mcp", "--header", bad)
	run("mcp", "add", "--transport", "sse", "bad-token-sse", p.base+"/mcp/sse", "--header", bad)
	run("mcp", "add", "--transport", "http", "lakegate-sensors", p.base+"/mcp/sensors", "--header", reader)
	want := map[string]string{
		"lakegate-sensors": "✔ Connected",
		"lakegate":         "✔ Connected",
		"lakegate-sse":     "✔ Connected",
		"lakegate-stdio":   "✔ Connected",
		"bad-token-http":   "✘",
		"bad-token-sse":    "✘",
	}
	// And through haproxy in front of two replicas sharing a cluster.
	if haproxyBin() != "" {
		ps := startReplicas(t, bin, 2)
		lb := startBalancer(t, ps[0].base, ps[1].base)
		run("mcp", "add", "--transport", "http", "lakegate-cluster", lb.url+"/mcp", "--header", reader)
		run("mcp", "add", "--transport", "sse", "lakegate-cluster-sse", lb.url+"/mcp/sse", "--header", reader)
		want["lakegate-cluster"], want["lakegate-cluster-sse"] = "✔ Connected", "✔ Connected"
	}

	check := func(when string) {
		t.Helper()
		out := run("mcp", "list")
		t.Logf("claude mcp list %s (Claude Code %s):\n%s", when, claudeCodeVersion, out)
		status := map[string]string{}
		for _, m := range regexp.MustCompile(`(?m)^(\S+): .* - ([✔✘].*)$`).FindAllStringSubmatch(out, -1) {
			status[m[1]] = m[2]
		}
		for name, want := range want {
			if got := status[name]; !strings.HasPrefix(got, want) {
				t.Errorf("%s %s: got %q, want %s...", name, when, got, want)
			}
		}
	}
	check("at start")

	// The operator edits the group and reloads.
	putTools(t, tools, groupTools(t, "list_tables", "describe_table", "run_sql"))
	reload := exec.CommandContext(t.Context(), bin, "admin", "tools", "reload", "--server", p.base)
	reload.Env = []string{"LAKEGATE_TOKEN=" + token("ops", "admin"), "PATH=" + os.Getenv("PATH"), "HOME=" + home}
	if out, err := reload.CombinedOutput(); err != nil {
		t.Fatalf("lakegate admin tools reload: %v\n%s", err, out)
	}
	check("after a tools reload")
}

// installClaudeCode installs the pinned Claude Code into a scratch
// directory and returns the path of its claude command.
func installClaudeCode(t *testing.T, npm string) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-save", "--no-audit", "--no-fund",
		"--loglevel=error", "@anthropic-ai/claude-code@"+claudeCodeVersion)
	cmd.Dir = dir
	// Its install script wants Node 22: the one make js-deps installs,
	// when it is there.
	if js, err := filepath.Abs(filepath.Join(jsDir, "node_modules", ".bin")); err == nil {
		if _, err := os.Stat(filepath.Join(js, "node")); err == nil {
			cmd.Env = append(os.Environ(), "PATH="+js+string(os.PathListSeparator)+os.Getenv("PATH"))
		}
	}
	began := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install @anthropic-ai/claude-code@%s: %v\n%s", claudeCodeVersion, err, out)
	}
	t.Logf("npm install @anthropic-ai/claude-code@%s: %v", claudeCodeVersion, time.Since(began).Round(100*time.Millisecond))
	claude := filepath.Join(dir, "node_modules", ".bin", "claude")
	if _, err := os.Stat(claude); err != nil {
		t.Fatalf("no claude command after npm install: %v", err)
	}
	return claude
}
