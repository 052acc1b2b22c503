package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/testutil"
)

// summaryLine is the line lakegate fetch ends with: the transfer and its
// rows (an export's rows are fetched as its job writes them, or once it
// is done).
var summaryLine = regexp.MustCompile(`lakegate fetch: transfer ([0-9a-f]{32}): (\d+) rows`)

// fetchServer serves the demo database with MCP on, as change sets, and
// returns the environment lakegate fetch reaches it with.
func fetchServer(t *testing.T, change func(*config.Config)) map[string]string {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.MCPEnabled = true
	change(&cfg)
	r := startServe(t, cfg)
	m := r.await(t, &r.stdout, connectLine)
	return map[string]string{"LAKEGATE_SERVER": m[1], "LAKEGATE_TOKEN": m[2]}
}

// TestFetch exports a demo table with `lakegate fetch --sql`, fetches the
// same transfer again by id, and checks both files hold every row.
func TestFetch(t *testing.T) {
	env := fetchServer(t, func(cfg *config.Config) { cfg.MCPBlockThreshold, cfg.MCPBlockSize = 4096, 2048 })
	dir := t.TempDir()

	first := filepath.Join(dir, "first.ndjson")
	_, errOut, err := run(t, env, "fetch", "--database", "demo", "--sql", "SELECT * FROM readings ORDER BY id", "-o", first, "--parallel", "3")
	if err != nil {
		t.Fatalf("fetch --sql: %v; stderr: %s", err, errOut)
	}
	id := ""
	summary := summaryLine.FindStringSubmatch(errOut)
	if summary != nil {
		id = summary[1]
	}
	a, err := os.ReadFile(first)
	if err != nil || id == "" {
		t.Fatalf("got file error %v and transfer %q; stderr: %s", err, id, errOut)
	}
	rows := bytes.Count(a, []byte("\n"))
	if rows < 100 || summary[2] != strconv.Itoa(rows) {
		t.Errorf("got %d rows in the file; stderr: %s", rows, errOut)
	}

	second := filepath.Join(dir, "second.ndjson")
	if _, errOut, err = run(t, env, "fetch", id, "-o", second); err != nil {
		t.Fatalf("fetch %s: %v; stderr: %s", id, err, errOut)
	}
	if b, _ := os.ReadFile(second); !bytes.Equal(a, b) {
		t.Errorf("fetch by id: %d bytes, want the %d bytes of the export", len(b), len(a))
	}

	// A token of another secret (a make run server's, after a restart)
	// is refused with where a good one comes from.
	stale := testutil.Token("another-secret-0123456789abcdef0123", "agent", lakegate.RoleReader)
	_, _, err = run(t, map[string]string{"LAKEGATE_SERVER": env["LAKEGATE_SERVER"], "LAKEGATE_TOKEN": stale}, "fetch", "--database", "demo", "--sql", "SELECT 1")
	if err == nil || !strings.Contains(err.Error(), "the server at "+env["LAKEGATE_SERVER"]+" did not take the token") || strings.Contains(err.Error(), stale) {
		t.Errorf("stale token: got %v, want the token hint naming the server", err)
	}

	// Errors: an unknown transfer leaves no file behind; bad arguments.
	missing := filepath.Join(dir, "missing.ndjson")
	if _, _, err = run(t, env, "fetch", strings.Repeat("0", 32), "-o", missing); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown transfer: got %v, want a 404", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("got %d files in the output directory, want 2 (no partial file)", len(entries))
	}
	if _, _, err = run(t, env, "fetch"); err == nil || !strings.Contains(err.Error(), "what to fetch? give a TRANSFER_ID") {
		t.Errorf("no arguments: got %v", err)
	}
	if _, _, err = run(t, env, "fetch", id, "--parallel", "0"); err == nil || !strings.Contains(err.Error(), "--parallel") {
		t.Errorf("--parallel 0: got %v", err)
	}
}

// TestFetchCutAtRowCap: an export that stops at the server's row cap
// (max_row_limit) says so, though every row it has is fetched.
func TestFetchCutAtRowCap(t *testing.T) {
	env := fetchServer(t, func(cfg *config.Config) { cfg.MaxRowLimit = 1000 })
	out := filepath.Join(t.TempDir(), "cut.ndjson")
	_, errOut, err := run(t, env, "fetch", "--database", "demo", "--sql", "SELECT * FROM readings ORDER BY id", "-o", out)
	if err != nil {
		t.Fatalf("fetch --sql: %v; stderr: %s", err, errOut)
	}
	b, _ := os.ReadFile(out)
	if n := bytes.Count(b, []byte("\n")); n != 1000 || !strings.Contains(errOut, "stopped at the server's row cap (1000 rows") {
		t.Errorf("got %d rows; stderr: %s; want 1000 and the cut said", n, errOut)
	}
}

func TestRateLimitedWait(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		min, max time.Duration // 0, 0: no retry
	}{
		{"rate limited", `{"error":{"kind":"rate_limited","message":"slow down","retry_after":0.5}}`, 500 * time.Millisecond, 600 * time.Millisecond},
		{"too long to wait", `{"error":{"kind":"rate_limited","message":"budget","retry_after":900}}`, 0, 0},
		{"another kind", `{"error":{"kind":"validation_error","message":"bad sql"}}`, 0, 0},
		{"no wait named", `{"error":{"kind":"rate_limited","message":"slow down"}}`, 0, 0},
		{"not JSON", `relation "reading" does not exist`, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rateLimitedWait(tt.text); got < tt.min || got > tt.max {
				t.Errorf("got %v, want %v to %v", got, tt.min, tt.max)
			}
		})
	}
}
