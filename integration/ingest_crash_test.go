package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakegate/lakegate/internal/testutil"
)

const (
	crashBatches   = 400
	crashBatchRows = 50
)

// crashBatch is the body of batch b: crashBatchRows rows tagged with b.
func crashBatch(b int) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range crashBatchRows {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"batch":%d,"seq":%d,"payload":"batch %d row %d %s"}`, b, i, b, i, strings.Repeat("x", 64))
	}
	sb.WriteByte(']')
	return sb.String()
}

// ingestAnswer is one POST /data answer.
type ingestAnswer struct {
	code     int
	inserted int64
	replayed bool
	err      error
}

func postBatch(ctx context.Context, client *http.Client, base, tok string, b int) ingestAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/data/iot/crash_ingest", strings.NewReader(crashBatch(b)))
	if err != nil {
		return ingestAnswer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", fmt.Sprintf("crash-batch-%d", b))
	resp, err := client.Do(req)
	if err != nil {
		return ingestAnswer{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return ingestAnswer{code: resp.StatusCode, err: err}
	}
	var res struct {
		Inserted int64 `json:"inserted"`
		Replayed bool  `json:"replayed"`
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &res); err != nil {
			return ingestAnswer{code: resp.StatusCode, err: fmt.Errorf("answer %q: %w", body, err)}
		}
	} else {
		err = fmt.Errorf("answer %d %s", resp.StatusCode, body)
	}
	return ingestAnswer{code: resp.StatusCode, inserted: res.Inserted, replayed: res.Replayed && resp.Header.Get("Idempotent-Replayed") == "true", err: err}
}

// batchCounts returns the rows per batch in crash_ingest.
func batchCounts(t *testing.T, conn *pgx.Conn) map[int]int {
	t.Helper()
	rows, _ := conn.Query(t.Context(), "SELECT batch, count(*) FROM crash_ingest GROUP BY batch")
	counts := map[int]int{}
	var b, n int
	if _, err := pgx.ForEachRow(rows, []any{&b, &n}, func() error { counts[b] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return counts
}

// withApplicationName returns the PostgreSQL URL u with application_name
// set to app.
func withApplicationName(t *testing.T, u, app string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := pu.Query()
	q.Set("application_name", app)
	pu.RawQuery = q.Encode()
	return pu.String()
}

// backends counts PostgreSQL's backends for the connections named app.
func backends(t *testing.T, conn *pgx.Conn, app string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitBackendsGone waits up to d until PostgreSQL has no backend left
// for the connections named app.
func waitBackendsGone(t *testing.T, conn *pgx.Conn, app string, d time.Duration) {
	t.Helper()
	start := time.Now()
	if !testutil.Within(d, func() bool { return backends(t, conn, app) == 0 }) {
		t.Fatalf("backends of the killed server: %d still there after %s, want 0", backends(t, conn, app), d)
	}
	if waited := time.Since(start); waited > 50*time.Millisecond {
		t.Logf("waited %s for the killed server's backends to end", waited.Round(time.Millisecond))
	}
}

// A server killed with SIGKILL in the middle of concurrent ingests loses no
// acknowledged row and leaves no batch half written; after a restart, the
// unacknowledged batches are retried with their Idempotency-Key and every
// batch is in the table exactly once, including those that were committed
// but whose answer the kill swallowed.
func TestIngestSurvivesSIGKILL(t *testing.T) {
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Not t.Context(): it is cancelled before cleanups run.
		ctx := context.Background()
		_, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS crash_ingest")
		_, _ = conn.Exec(ctx, "DELETE FROM lakegate_idempotency WHERE table_name = 'crash_ingest'")
		conn.Close(ctx)
	})
	// No unique key: a batch written twice would show.
	if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS crash_ingest;
CREATE TABLE crash_ingest (batch int NOT NULL, seq int NOT NULL, payload text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	tok := token("loader", "writer")
	client := newClient(t)

	// The loader is one subject sending as fast as it can: no rate limit.
	limits := []string{"LAKEGATE_RATE_LIMIT_RPS=0", "LAKEGATE_MAX_QUERIES_PER_SUBJECT=0"}
	// The server to be killed names its connections (the last
	// LAKEGATE_DATABASES in the environment wins), so that the test can
	// wait for them to end.
	const app = "lakegate_crash_ingest_test"
	p := startProc(t, bin, append([]string{"LAKEGATE_DATABASES=iot=" + withApplicationName(t, appURL, app)}, limits...)...)
	var (
		next   atomic.Int64 // the next batch to send
		acked  = make([]bool, crashBatches)
		mu     sync.Mutex // guards acked, failed
		failed int
		nAcked atomic.Int64
		wg     sync.WaitGroup
	)
	killed := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b := int(next.Add(1) - 1)
				if b >= crashBatches {
					return
				}
				a := postBatch(ctx, client, p.base, tok, b)
				mu.Lock()
				if a.err == nil && a.code == http.StatusOK && a.inserted == crashBatchRows {
					acked[b] = true
					nAcked.Add(1)
				} else {
					failed++
				}
				mu.Unlock()
				if a.err != nil {
					select {
					case <-killed:
						return // the server is gone
					default:
						t.Errorf("batch %d before the kill: %v", b, a.err)
						return
					}
				}
			}
		}()
	}
	// Kill it mid-stream, with requests in flight.
	testutil.Eventually(t, time.Minute, "40 batches acknowledged", func() bool { return nAcked.Load() >= 40 })
	if backends(t, conn, app) == 0 {
		t.Fatalf("no backend named %s while the server ingests: the wait for them after the kill would prove nothing", app)
	}
	close(killed)
	p.signal(syscall.SIGKILL)
	wg.Wait()
	if code := p.wait(10 * time.Second); code != -1 {
		t.Errorf("exit code: got %d, want -1 (killed)", code)
	}
	client.CloseIdleConnections()
	sent := int(min(next.Load(), crashBatches))
	t.Logf("killed after %d acknowledged batches; %d sent, %d failed", nAcked.Load(), sent, failed)
	if sent == crashBatches || failed == 0 {
		t.Fatalf("the kill did not land mid-stream (sent %d of %d, %d failed)", sent, crashBatches, failed)
	}

	// The kill does not stop what PostgreSQL already received: a backend
	// may still be running a COMMIT the server sent just before it died,
	// and that batch lands after a count taken now (it was then counted
	// as not written, and its retry below found it already there). Each
	// backend ends once it has read the dead connection to its end, so
	// the table is final when none of the server's is left.
	waitBackendsGone(t, conn, app, 30*time.Second)
	counts := batchCounts(t, conn)
	committedUnacked := 0
	for b := range crashBatches {
		n := counts[b]
		switch {
		case acked[b] && n != crashBatchRows:
			t.Errorf("acknowledged batch %d: got %d rows, want %d", b, n, crashBatchRows)
		case n != 0 && n != crashBatchRows:
			t.Errorf("batch %d is half written: %d of %d rows", b, n, crashBatchRows)
		case !acked[b] && n == crashBatchRows:
			committedUnacked++
		}
	}
	t.Logf("%d batches were committed but not acknowledged", committedUnacked)

	// Restart; retry everything not acknowledged, and a few that were.
	p = startProc(t, bin, limits...)
	replayed := 0
	for b := range crashBatches {
		if acked[b] && b%10 != 0 {
			continue
		}
		a := postBatch(ctx, client, p.base, tok, b)
		if a.err != nil || a.inserted != crashBatchRows {
			t.Fatalf("retry of batch %d: got %+v, want %d rows", b, a, crashBatchRows)
		}
		if wasIn := counts[b] == crashBatchRows; a.replayed != wasIn {
			t.Errorf("retry of batch %d: got replayed %v, want %v (committed before the kill: %v)", b, a.replayed, wasIn, wasIn)
		}
		if a.replayed {
			replayed++
		}
	}
	t.Logf("after the restart: %d retries were replays", replayed)
	counts = batchCounts(t, conn)
	for b := range crashBatches {
		if counts[b] != crashBatchRows {
			t.Errorf("batch %d: got %d rows, want exactly %d", b, counts[b], crashBatchRows)
		}
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Errorf("exit code after SIGTERM: got %d, want 0; stderr: %s", code, p.stderr.String())
	}
}
