package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/config"
)

// TestResultMemory measures the real binary's peak resident memory
// (VmHWM) around result-heavy calls on the benchmark database, each on a
// fresh server: the default agent call for every row of readings (and 4×
// that, and a second call in the same process), a hostile result of 16 MB
// rows (400 MB) on /rest/sql and on run_sql, rows past max_row_bytes,
// eight hostile calls at once from one reader, and eight readers of a large
// numeric array at once (issue 21). A benchmark, run by make bench:
//
//	LAKEGATE_BENCH_MEMORY=1 LAKEGATE_BENCH_DATABASE_URL=... go test -run '^TestResultMemory$' -count=1 -v ./integration/
func TestResultMemory(t *testing.T) {
	benchURL := benchDatabase(t, "LAKEGATE_BENCH_MEMORY")
	bin := os.Getenv("LAKEGATE_BENCH_BIN") // another build to compare, e.g. an older commit
	if bin == "" {
		bin = buildBinary(t)
	}
	serve := func(t *testing.T) (*proc, *mcpsdk.ClientSession) {
		p := startProc(t, bin, benchEnv(benchURL)...)
		return p, benchSession(t, p)
	}
	// call runs run_sql and returns the reply's size (text and structured
	// content, as JSON).
	call := func(t *testing.T, cs *mcpsdk.ClientSession, args map[string]any) int {
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		if res.IsError {
			t.Fatalf("run_sql: %s", b)
		}
		return len(b)
	}
	mib := func(kb int64) string { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }
	all := map[string]any{"database": "bench", "sql": "SELECT * FROM readings", "max_rows": 0}

	t.Run("default agent call, every row", func(t *testing.T) {
		p, cs := serve(t)
		base := hwm(t, p.cmd.Process.Pid)
		n := call(t, cs, all)
		first := hwm(t, p.cmd.Process.Pid)
		call(t, cs, all)
		second := hwm(t, p.cmd.Process.Pid)
		t.Logf("run_sql all readings (max_rows 0): server peak RSS %s (at start %s), after a second call %s; reply %d bytes",
			mib(first), mib(base), mib(second), n)
	})
	t.Run("an inline answer near the threshold", func(t *testing.T) {
		p, cs := serve(t)
		n := call(t, cs, map[string]any{"database": "bench", "sql": "SELECT * FROM readings ORDER BY id", "max_rows": 100000})
		t.Logf("run_sql 100,000 rows answered inline (reply %d bytes): server peak RSS %s", n, mib(hwm(t, p.cmd.Process.Pid)))
	})
	t.Run("default agent call, 4x the rows", func(t *testing.T) {
		p, cs := serve(t)
		call(t, cs, map[string]any{"database": "bench", "sql": "SELECT r.* FROM readings r, generate_series(1, 4) g", "max_rows": 0})
		t.Logf("run_sql all readings x4 (max_rows 0): server peak RSS %s", mib(hwm(t, p.cmd.Process.Pid)))
	})
	// 25 rows of 16 MB: each row within max_row_bytes (16 MiB), 400 MB in all.
	hostile := "SELECT repeat('x', 16000000) AS big FROM generate_series(1, 25)"
	t.Run("hostile rows on /rest/sql", func(t *testing.T) {
		p, _ := serve(t)
		body := fmt.Sprintf(`{"database":"bench","sql":%q}`, hostile)
		req, _ := http.NewRequest("POST", p.base+"/rest/sql", strings.NewReader(body))
		resp, err := httpClient(token("bench", "reader")).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("got %d", resp.StatusCode)
		}
		t.Logf("/rest/sql 25 rows of 16 MB (%d MB of JSON): server peak RSS %s", n/1000000, mib(hwm(t, p.cmd.Process.Pid)))
	})
	t.Run("hostile rows on run_sql", func(t *testing.T) {
		p, cs := serve(t)
		n := call(t, cs, map[string]any{"database": "bench", "sql": hostile})
		t.Logf("run_sql 25 rows of 16 MB (default max_rows): reply %d bytes, server peak RSS %s", n, mib(hwm(t, p.cmd.Process.Pid)))
	})
	t.Run("rows over max_row_bytes on run_sql", func(t *testing.T) {
		p, cs := serve(t)
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{
			"database": "bench", "sql": "SELECT repeat('x', 50000000) AS big FROM generate_series(1, 4)"}})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*mcpsdk.TextContent).Text
		if !res.IsError || !strings.Contains(text, "max_row_bytes") {
			t.Fatalf("got %s, want the row bound's error", text)
		}
		t.Logf("run_sql 4 rows of 50 MB: refused (%d-byte error naming max_row_bytes), server peak RSS %s", len(text), mib(hwm(t, p.cmd.Process.Pid)))
	})
	t.Run("eight hostile calls at once", func(t *testing.T) {
		p, cs := serve(t)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { call(t, cs, map[string]any{"database": "bench", "sql": hostile}) })
		}
		wg.Wait()
		t.Logf("8 x run_sql 25 rows of 16 MB at once, one reader: server peak RSS %s", mib(hwm(t, p.cmd.Process.Pid)))
	})
	// A numeric array of 400,000 elements: about 6 MB on the wire, 15 MB
	// as JSON, so within max_row_bytes (16 MiB) counted either way; the
	// decoding itself is measured. /rest/sql streams it (decoded as it is
	// written), run_sql holds it. 1,000,000 elements (14 MB on the wire,
	// 37 MB as JSON) stream too, and are refused where rows are held.
	// Target: 256 MiB for eight.
	arrays := func(n int) string {
		return fmt.Sprintf("SELECT array_agg(g::numeric*1e30) AS a FROM generate_series(1, %d) g", n)
	}
	restReaders := func(t *testing.T, p *proc, sql string, want int) int64 {
		body := fmt.Sprintf(`{"database":"bench","sql":%q}`, sql)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int64
		)
		client := httpClient(token("bench", "reader"))
		for range 8 {
			wg.Go(func() {
				req, _ := http.NewRequest("POST", p.base+"/rest/sql", strings.NewReader(body))
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("got %d, want %d", resp.StatusCode, want)
				}
				mu.Lock()
				total += n
				mu.Unlock()
			})
		}
		wg.Wait()
		return total
	}
	t.Run("eight array readers on /rest/sql", func(t *testing.T) {
		p, _ := serve(t)
		n := restReaders(t, p, arrays(400000), 200)
		t.Logf("8 x /rest/sql a 400,000-element numeric array at once (%d MB of JSON in all): server peak RSS %s (target 256 MiB)",
			n/1000000, mib(hwm(t, p.cmd.Process.Pid)))
	})
	t.Run("eight array readers on run_sql", func(t *testing.T) {
		p, cs := serve(t)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { call(t, cs, map[string]any{"database": "bench", "sql": arrays(400000)}) })
		}
		wg.Wait()
		t.Logf("8 x run_sql a 400,000-element numeric array at once, one reader: server peak RSS %s (target 256 MiB)",
			mib(hwm(t, p.cmd.Process.Pid)))
	})
	t.Run("eight readers of an array past max_row_bytes decoded on /rest/sql", func(t *testing.T) {
		p, _ := serve(t)
		n := restReaders(t, p, arrays(1000000), http.StatusOK)
		t.Logf("8 x /rest/sql a 1,000,000-element numeric array at once (%d MB of JSON in all, streamed): server peak RSS %s",
			n/1000000, mib(hwm(t, p.cmd.Process.Pid)))
	})
}

// benchDatabase is the benchmark database's URL, or skips t unless the
// benchmark's switch (flag) and LAKEGATE_BENCH_DATABASE_URL are set.
func benchDatabase(t *testing.T, flag string) string {
	t.Helper()
	url := os.Getenv("LAKEGATE_BENCH_DATABASE_URL")
	if os.Getenv(flag) == "" || url == "" {
		t.Skipf("a benchmark: set %s=1 and LAKEGATE_BENCH_DATABASE_URL (make bench does)", flag)
	}
	return url
}

// benchEnv serves the benchmark database with room for big results: block
// budgets of 16 and 8 GiB, no rate limit, a 5 minute statement timeout;
// through the least-privileged roles make bench gives it
// (integration/testdata/roles.sql).
func benchEnv(raw string, extra ...string) []string {
	return append([]string{"LAKEGATE_DATABASES=bench=" + appURLOf(raw), "LAKEGATE_QUERY_ROLE=lakegate_reader",
		"LAKEGATE_MCP_BLOCK_BUDGET=" + strconv.Itoa(16<<30), "LAKEGATE_MCP_BLOCK_BUDGET_PER_SUBJECT=" + strconv.Itoa(8<<30),
		"LAKEGATE_RATE_LIMIT_RPS=0", "LAKEGATE_STATEMENT_TIMEOUT=5m"}, extra...)
}

// appURLOf is the URL of the database at raw as lakegate's own role,
// lakegate, connects to it.
func appURLOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.User = url.User("lakegate")
	return u.String()
}

// benchSession is a go-sdk client session over legacy SSE to p, as a
// reader; closed when the test ends.
func benchSession(t *testing.T, p *proc) *mcpsdk.ClientSession {
	t.Helper()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.SSEClientTransport{
		Endpoint: p.base + "/mcp/sse", HTTPClient: httpClient(token("bench", "reader"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// hwm is the peak resident memory (VmHWM) of process pid, in KiB, after a
// moment for the process to settle.
func hwm(t *testing.T, pid int) int64 {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
	return procStatus(t, pid, "VmHWM")
}

// TestGCHeadroomMemory reads the server's peak RSS over the same calls
// with gc_headroom 0, the default (8 MiB) and 32 MiB, each on a fresh
// server: 1,000
// point calls and 100 calls of 1,000 rows over each transport. A
// benchmark, run by make bench:
//
//	LAKEGATE_BENCH_MEMORY=1 LAKEGATE_BENCH_DATABASE_URL=... go test -run '^TestGCHeadroomMemory$' -count=1 -v ./integration/
func TestGCHeadroomMemory(t *testing.T) {
	benchURL := benchDatabase(t, "LAKEGATE_BENCH_MEMORY")
	bin := buildBinary(t)
	point := map[string]any{"database": "bench", "sql": "SELECT * FROM readings WHERE id = $1", "params": []any{4242}}
	rows := map[string]any{"database": "bench", "sql": "SELECT * FROM readings ORDER BY id LIMIT 1000", "max_rows": 1000}
	headrooms := []int{0, config.DefaultGCHeadroom, 32 << 20}
	peak := make([]int64, len(headrooms))
	for i, headroom := range headrooms {
		p := startProc(t, bin, benchEnv(benchURL, "LAKEGATE_MCP_KEEPALIVE=1h", "LAKEGATE_GC_HEADROOM="+strconv.Itoa(headroom))...)
		start := procStatus(t, p.cmd.Process.Pid, "VmRSS")
		for _, tr := range []string{"sse", "http"} {
			cs := benchSessionOver(t, p.base, tr, token("bench", "reader"))
			for range 1000 {
				callTool(t, cs, point)
			}
			for range 100 {
				callTool(t, cs, rows)
			}
			cs.Close()
		}
		peak[i] = procStatus(t, p.cmd.Process.Pid, "VmHWM")
		t.Logf("gc_headroom %d MiB: peak RSS %.1f MiB (%.1f MiB at start)", headroom>>20, float64(peak[i])/1024, float64(start)/1024)
	}
	// The headroom's price is the headroom: the heap's goal is 32 MiB
	// over what is live (the runtime keeps the pages it grew into). Were
	// the runtime's 4 MiB floor scaled by the GOGC set, the goal would be
	// twice that and more.
	if grew := float64(peak[2]-peak[0]) / 1024; grew > 40 {
		t.Errorf("gc_headroom 32 MiB raised the peak by %.1f MiB, want at most 40", grew)
	}
}
