package integration

import (
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testutil"
)

// TestBigExportJob (make bench, LAKEGATE_BENCH_JOBS=1): an export of the
// half-hour class, generated on the fly (LAKEGATE_BENCH_JOB_ROWS, default
// 40M rows of an id and an md5), runs as a job while `lakegate fetch
// --sql` fetches its blocks as they are written, to a pipe. It reports the
// wall time, when the first bytes came out, and the server's resident
// memory: sampled through the export, its peak in the first tenth against
// its peak in all (flat: the export holds no more as it grows).
//
//	LAKEGATE_BENCH_JOBS=1 LAKEGATE_BENCH_DATABASE_URL=... go test -run '^TestBigExportJob$' -count=1 -v -timeout 30m ./integration/
func TestBigExportJob(t *testing.T) {
	benchURL := benchDatabase(t, "LAKEGATE_BENCH_JOBS")
	rows := 40_000_000
	if v := os.Getenv("LAKEGATE_BENCH_JOB_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("LAKEGATE_BENCH_JOB_ROWS=%q: want a row count", v)
		}
		rows = n
	}
	bin := buildBinary(t)
	p := startProc(t, bin, append(benchEnv(benchURL), "LAKEGATE_JOB_TIMEOUT=2h", "LAKEGATE_MAX_ROW_LIMIT="+strconv.Itoa(2*rows))...)
	pid := p.cmd.Process.Pid
	start := time.Now()
	atStart := procStatus(t, pid, "VmRSS")

	// The server's resident memory, every 200 ms, with when.
	type sample struct {
		at  time.Duration
		rss int64
	}
	var (
		mu      sync.Mutex
		samples []sample
	)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
				if err != nil {
					return
				}
				if m := vmRSS.FindSubmatch(b); m != nil {
					kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
					mu.Lock()
					samples = append(samples, sample{time.Since(start), kb})
					mu.Unlock()
				}
			}
		}
	}()

	sql := "SELECT g AS id, md5(g::text) AS h FROM generate_series(1, " + strconv.Itoa(rows) + ") g"
	cmd := exec.CommandContext(t.Context(), bin, "fetch", "--database", "bench", "--sql", sql, "-o", "-")
	cmd.Env = binaryEnv("LAKEGATE_SERVER="+p.base, "LAKEGATE_TOKEN="+token("alice", "reader"))
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := &lineCounter{}
	if _, err := io.Copy(lines, out); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("fetch: %v\n%s", err, stderr.String())
	}
	wall := time.Since(start)
	close(stop)
	<-sampled
	peak := procStatus(t, pid, "VmHWM")

	log := stderr.String()
	if !strings.Contains(log, "fetched as it is written") || lines.n != rows {
		t.Fatalf("got %d rows; want %d, fetched as the job wrote them:\n%s", lines.n, rows, log)
	}
	first := regexp.MustCompile(`first bytes out after ([0-9.]+)s`).FindStringSubmatch(log)
	named := regexp.MustCompile(`named in ([0-9.]+)s`).FindStringSubmatch(log)
	mu.Lock()
	defer mu.Unlock()
	var early, all int64
	for _, s := range samples {
		if s.at <= wall/10 {
			early = max(early, s.rss)
		}
		all = max(all, s.rss)
	}
	t.Logf("export job of %d rows, fetched as written: wall %.1f s; its transfer named after %s s, first bytes out after %s s", rows, wall.Seconds(), named[1], first[1])
	t.Logf("server resident memory: %.1f MiB at start, peak %.1f MiB in the first tenth, %.1f MiB over the export (%.2f×), VmHWM %.1f MiB",
		float64(atStart)/1024, float64(early)/1024, float64(all)/1024, float64(all)/float64(max(early, 1)), float64(peak)/1024)
}

// vmRSS finds the resident set size in /proc/PID/status.
var vmRSS = regexp.MustCompile(`VmRSS:\s+(\d+) kB`)
