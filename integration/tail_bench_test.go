package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestTailWaiters measures 1,000 tails waiting at once on one server (the
// real binary on the benchmark database, over REST, 100 subjects of 10):
// the server's resident memory they cost (VmRSS before and while they
// wait, and the peak), the database's transactions while nothing arrives
// (the re-check's, one a second), and how long after one ingest every one
// of them has answered. A benchmark, run by make bench:
//
//	LAKEGATE_BENCH_TAIL=1 LAKEGATE_BENCH_DATABASE_URL=... go test -run '^TestTailWaiters$' -count=1 -v ./integration/
func TestTailWaiters(t *testing.T) {
	benchURL := benchDatabase(t, "LAKEGATE_BENCH_TAIL")
	bin := buildBinary(t)
	p := startProc(t, bin, benchEnv(benchURL)...)
	pid := p.cmd.Process.Pid
	const waiters = 1000
	// Where the tails start: after the newest reading.
	first := tailREST(t, p.base, token("tail-0", "reader"), "", 0)
	writer := token("tail-ingest", "writer")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: waiters, MaxConnsPerHost: 0}}
	settle := func() { time.Sleep(time.Second) }
	settle()
	before := procStatus(t, pid, "VmRSS")

	var wg sync.WaitGroup
	answered := make(chan time.Time, waiters)
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(map[string]any{"database": "bench", "table": "readings", "columns": []string{"id"},
				"cursor": first, "wait_s": 25})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, p.base+"/rest/tail", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+token(fmt.Sprintf("tail-%d", i%100), "reader"))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var out struct {
				RowCount int `json:"row_count"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.RowCount != 1 {
				t.Errorf("a tail: %d, %d rows, %v", resp.StatusCode, out.RowCount, err)
			}
			answered <- time.Now()
		}()
	}
	// Every tail waiting, then nothing arriving for five seconds.
	time.Sleep(3 * time.Second)
	xacts := func() int64 {
		conn, err := pgx.Connect(context.Background(), benchURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int64
		if err := conn.QueryRow(context.Background(), "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	x0 := xacts()
	time.Sleep(5 * time.Second)
	x1 := xacts()
	waiting := procStatus(t, pid, "VmRSS")

	ingested := time.Now()
	body := `[{"id": 990000001, "device_id": 7, "ts": "2027-01-01T00:00:00Z", "temperature": 20, "humidity": 40, "status": "ok"}]`
	if code, out := post(t, p.base+"/data/bench/readings", writer, body); code != http.StatusOK {
		t.Fatalf("ingest: %d %s", code, out)
	}
	wg.Wait()
	close(answered)
	var last time.Time
	for a := range answered {
		if a.After(last) {
			last = a
		}
	}
	peak := procStatus(t, pid, "VmHWM")
	t.Logf("tail: %d waiters cost %.1f MiB of server memory (RSS %.1f → %.1f MiB, peak %.1f MiB); "+
		"%d database transactions in 5 s with nothing arriving (each check's own, and this test's two); all answered %v after one ingest",
		waiters, float64(waiting-before)/1024, float64(before)/1024, float64(waiting)/1024, float64(peak)/1024,
		x1-x0, last.Sub(ingested).Round(time.Millisecond))
	// Leave the benchmark data as it was.
	if conn, err := pgx.Connect(context.Background(), benchURL); err == nil {
		_, _ = conn.Exec(context.Background(), "DELETE FROM readings WHERE id = 990000001")
		_ = conn.Close(context.Background())
	}
}

// tailREST calls POST /rest/tail and returns its next cursor.
func tailREST(t *testing.T, base, tok, cursor string, wait int) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"database": "bench", "table": "readings", "columns": []string{"id"}, "cursor": cursor, "wait_s": wait, "limit": 1})
	code, out := post(t, base+"/rest/tail", tok, string(body))
	var res struct {
		NextCursor string `json:"next_cursor"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(out), &res) != nil || res.NextCursor == "" {
		t.Fatalf("tail: %d %s", code, out)
	}
	return res.NextCursor
}
