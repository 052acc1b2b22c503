package integration

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testutil"
)

// fetchLine is lakegate fetch's last line on stderr.
var fetchLine = regexp.MustCompile(`transfer (\w+): (\d+) rows, (\d+) blocks, (\d+) bytes, every block checked`)

// runFetch runs `lakegate fetch args...` against base as alice and returns
// its stderr, the time it took and its error.
func runFetch(t *testing.T, bin, base string, args ...string) (string, time.Duration, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"fetch"}, args...)...)
	cmd.Env = binaryEnv("LAKEGATE_SERVER="+base, "LAKEGATE_TOKEN="+token("alice", "reader"))
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	return stderr.String(), time.Since(start), err
}

// lineCounter counts the lines written to it.
type lineCounter struct{ n int }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

// rateLimited reads lakegate_rate_limited_total{limit="requests"}.
func rateLimited(t *testing.T, base string) float64 {
	t.Helper()
	code, body := get(t, base+"/metrics", token("root", "admin"))
	if code != http.StatusOK {
		t.Fatalf("metrics: got %d %s", code, body)
	}
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, `lakegate_rate_limited_total{limit="requests"} `); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// TestFetchDefaultLimits: with the default settings (rate limit 50/s,
// burst 100 per subject) `lakegate fetch` exports 4 million generated
// rows through run_sql and fetches their blocks, far more than the burst,
// without a single 429: block reads take no token.
func TestFetchDefaultLimits(t *testing.T) {
	const rows = 4_000_000
	begin := time.Now()
	bin := buildBinary(t)
	p := startProc(t, bin)
	t.Logf("binary built and server started in %.2f s", time.Since(begin).Seconds())
	// What the file must hold, worked out while the fetch runs: exactly
	// the rows PostgreSQL generates, in order (NDJSON blocks hold one
	// array per row; the manifest names the columns).
	expected, computed := make(chan string, 1), make(chan struct{})
	t.Cleanup(func() { <-computed })
	go func() {
		defer close(computed)
		want := sha256.New()
		bw := bufio.NewWriterSize(want, 1<<16)
		var line []byte
		for g := 1; g <= rows; g++ {
			sum := md5.Sum(strconv.AppendInt(line[:0], int64(g), 10))
			line = append(line[:0], '[')
			line = strconv.AppendInt(line, int64(g), 10)
			line = append(line, `,"`...)
			line = hex.AppendEncode(line, sum[:])
			line = append(line, "\"]\n"...)
			bw.Write(line)
		}
		bw.Flush()
		expected <- hex.EncodeToString(want.Sum(nil))
	}()
	out := filepath.Join(t.TempDir(), "rows.ndjson")
	sql := "SELECT g AS id, md5(g::text) AS h FROM generate_series(1, " + strconv.Itoa(rows) + ") g"
	stderr, took, err := runFetch(t, bin, p.base, "--database", "iot", "--sql", sql, "-o", out)
	if err != nil {
		t.Fatalf("fetch: %v\n%s", err, stderr)
	}
	m := fetchLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary line in %q", stderr)
	}
	blocks, _ := strconv.Atoi(m[3])
	t.Logf("4M rows exported and fetched in %.2f s (%s blocks, %s bytes): %s", took.Seconds(), m[3], m[4], strings.TrimSpace(stderr))
	// The export runs for seconds: its blocks are fetched as its job
	// writes them.
	if !strings.Contains(stderr, "fetched as it is written") {
		t.Errorf("the export's blocks were fetched only after its end: %s", stderr)
	}
	if m[2] != strconv.Itoa(rows) || blocks <= 100 {
		t.Errorf("got %s rows in %d blocks, want %d rows in more blocks than the burst of 100", m[2], blocks, rows)
	}

	checkStart := time.Now()
	wantSum := <-expected
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, lines := sha256.New(), &lineCounter{}
	if _, err := io.Copy(io.MultiWriter(got, lines), f); err != nil {
		t.Fatal(err)
	}
	gotSum := hex.EncodeToString(got.Sum(nil))
	if lines.n != rows || gotSum != wantSum {
		head := make([]byte, 200)
		n, _ := f.ReadAt(head, 0)
		t.Errorf("the file begins %q", head[:n])
		t.Errorf("got %d lines with sha256 %s, want %d lines with sha256 %s", lines.n, gotSum, rows, wantSum)
	}
	if n := rateLimited(t, p.base); n != 0 {
		t.Errorf("lakegate_rate_limited_total{limit=requests}: got %v, want 0", n)
	}
	t.Logf("file checked in %.2f s", time.Since(checkStart).Seconds())
}

// TestFetchRateLimit: under a rate limit of one request per 100 s (burst
// 2), an export and the fetch of its 100+ blocks take two tokens (the
// run_sql call and the manifest); the next fetch's manifest is refused,
// and the client, asked to wait longer than it accepts, fails at once
// saying so and leaves no file.
func TestFetchRateLimit(t *testing.T) {
	bin := buildBinary(t)
	p := startProc(t, bin, "LAKEGATE_RATE_LIMIT_RPS=0.01", "LAKEGATE_RATE_LIMIT_BURST=2", "LAKEGATE_MCP_BLOCK_SIZE=4096")
	dir := t.TempDir()
	out := filepath.Join(dir, "rows.csv")
	stderr, _, err := runFetch(t, bin, p.base, "--database", "iot", "--sql", "SELECT g, md5(g::text) FROM generate_series(1, 200000) g",
		"--format", "csv", "-o", out, "--parallel", "8")
	if err != nil {
		t.Fatalf("fetch: %v\n%s", err, stderr)
	}
	m := fetchLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary line in %q", stderr)
	}
	if blocks, _ := strconv.Atoi(m[3]); m[2] != "200000" || blocks <= 100 {
		t.Errorf("got %s rows in %s blocks, want 200000 in more than 100", m[2], m[3])
	}
	if data, _ := os.ReadFile(out); bytes.Count(data, []byte("\n")) != 200001 {
		t.Errorf("got %d lines, want a header and 200000 rows", bytes.Count(data, []byte("\n")))
	}

	again := filepath.Join(dir, "again.csv")
	start := time.Now()
	stderr, _, err = runFetch(t, bin, p.base, m[1], "-o", again)
	if err == nil || !strings.Contains(stderr, "429") || !strings.Contains(stderr, "asks to wait") {
		t.Errorf("fetch over the limit: got %v, want a 429 the client will not wait for:\n%s", err, stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the refused fetch took %v, want at once", d)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("got %d files in the output directory, want 1 (no partial file)", len(entries))
	}
	if n := rateLimited(t, p.base); n != 1 {
		t.Errorf("lakegate_rate_limited_total{limit=requests}: got %v, want 1 (the second manifest)", n)
	}
}
