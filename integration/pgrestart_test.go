package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
)

// pgCtl runs the throwaway cluster's stop/start script.
func pgCtl(t *testing.T, script, action string) {
	t.Helper()
	if out, err := exec.Command(script, action).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", script, action, err, out)
	}
}

// appConnections counts the connections the PostgreSQL at dbURL has from app.
func appConnections(ctx context.Context, dbURL, app string) (int, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n)
	return n, err
}

// call is the outcome of one REST query under load.
type call struct {
	start, end time.Time
	code       int
	kind       string
	retryAfter string
	err        error
}

// PostgreSQL stopped and started under load: calls in flight fail with
// unavailable (retryable, Retry-After), nothing else goes wrong, new calls
// succeed soon after the database is back, and neither goroutines nor
// connections are left over.
func TestPostgresRestartUnderLoad(t *testing.T) {
	// A cluster of its own: other packages' tests run meanwhile.
	script, restartURL := os.Getenv("LAKEGATE_TEST_PG_CTL"), os.Getenv("LAKEGATE_TEST_RESTART_DATABASE_URL")
	if script == "" || restartURL == "" {
		t.Skip("LAKEGATE_TEST_PG_CTL and LAKEGATE_TEST_RESTART_DATABASE_URL are not set: no database is ours to restart (with-postgres.sh sets them)")
	}
	// The server's connections carry an application name, to count them.
	const app = "lakegate_restart_test"
	login, err := pgtest.LeastPrivileged(t.Context(), restartURL)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(login)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	// Registered before start: runs after the server and its pool closed.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var (
			n   int
			err error
		)
		if !testutil.Within(10*time.Second, func() bool {
			n, err = appConnections(ctx, restartURL, app)
			return err == nil && n == 0
		}) {
			t.Errorf("connections left after the server stopped: got %d (%v), want 0", n, err)
		}
	})
	e := start(t, envOptions{config: func(c *config.Config) {
		c.Databases = []config.Database{{Name: "iot", URL: u.String()}}
		c.RateLimitRPS = 0 // the load is one subject as fast as it can
		c.MaxQueriesPerSubject = 0
		// Fewer workers than the load's six callers: some calls always
		// wait for one, and are in flight when PostgreSQL stops.
		c.MaxWorkers, c.MCPMaxWorkers = 4, 2
	}})
	tok := token("loader", "reader")
	client := newClient(t)
	query := func(sqlText string) call {
		c := call{start: time.Now()}
		body, _ := json.Marshal(map[string]any{"database": "iot", "sql": sqlText})
		req, _ := http.NewRequest(http.MethodPost, e.base+"/rest/sql", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		c.end = time.Now()
		if err != nil {
			c.err = err
			return c
		}
		defer resp.Body.Close()
		c.code = resp.StatusCode
		c.retryAfter = resp.Header.Get("Retry-After")
		var eb struct {
			Error struct {
				Kind string `json:"kind"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		c.kind = eb.Error.Kind
		return c
	}
	if c := query("SELECT 1"); c.code != http.StatusOK {
		t.Fatalf("warm-up: got %+v", c)
	}
	client.CloseIdleConnections()
	baseline := goleak.IgnoreCurrent()

	// Load: workers running a query of some 100 ms, back to back.
	const slow = "SELECT count(*) FROM generate_series(1, 1000000)"
	var (
		mu     sync.Mutex
		calls  []call
		ok     atomic.Int64
		halt   = make(chan struct{})
		wg     sync.WaitGroup
		okSeen [6]atomic.Int64
	)
	for w := range okSeen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-halt:
					return
				default:
				}
				c := query(slow)
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
				if c.code == http.StatusOK {
					ok.Add(1)
					okSeen[w].Add(1)
				} else {
					time.Sleep(20 * time.Millisecond) // as a client backs off
				}
			}
		}()
	}
	defer func() {
		select {
		case <-halt:
		default:
			close(halt)
		}
		wg.Wait()
	}()
	testutil.Eventually(t, 30*time.Second, "30 calls answered", func() bool { return ok.Load() >= 30 })

	stopBegan := time.Now()
	pgCtl(t, script, "stop")
	stopped := time.Now()
	t.Logf("PostgreSQL stopped in %v", stopped.Sub(stopBegan).Round(time.Millisecond))
	time.Sleep(time.Second)
	pgCtl(t, script, "start")
	back := time.Now()

	// New calls succeed soon: poll with fresh calls until one does.
	testutil.Eventually(t, 10*time.Second, "a call to succeed once PostgreSQL is back", func() bool {
		return query("SELECT 1").code == http.StatusOK
	})
	recovered := time.Since(back)
	t.Logf("first call succeeded %v after PostgreSQL was back (goal: within 1s)", recovered.Round(time.Millisecond))
	// Every worker gets through again.
	var seen [len(okSeen)]int64
	for w := range okSeen {
		seen[w] = okSeen[w].Load()
	}
	testutil.Eventually(t, 10*time.Second, "a call answered for every caller", func() bool {
		for w := range okSeen {
			if okSeen[w].Load() == seen[w] {
				return false
			}
		}
		return true
	})
	close(halt)
	wg.Wait()

	inFlight, failed := 0, 0
	for _, c := range calls {
		if c.code == http.StatusOK {
			continue
		}
		failed++
		if c.err != nil || c.code != http.StatusServiceUnavailable || c.kind != "unavailable" || c.retryAfter == "" {
			t.Errorf("failed call: got %d %q Retry-After %q (%v), want 503 unavailable with Retry-After", c.code, c.kind, c.retryAfter, c.err)
			continue
		}
		if c.start.Before(stopBegan) && c.end.After(stopBegan) {
			inFlight++
		}
	}
	t.Logf("%d calls, %d failed with unavailable, %d of them in flight when the stop began", len(calls), failed, inFlight)
	if inFlight == 0 {
		t.Error("no call was in flight when PostgreSQL stopped: the test proved nothing")
	}

	// Nothing left over: no goroutine beyond those before the load, and
	// no more connections than the pool holds.
	client.CloseIdleConnections()
	if err := findLeaks(baseline); err != nil {
		t.Errorf("goroutines left after the restart: %v", err)
	}
	st := e.engine.PoolStats()
	n, err := appConnections(t.Context(), restartURL, app)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Acquired != 0 || int32(n) > st[0].Max || int32(n) != st[0].Total {
		t.Errorf("connections: PostgreSQL has %d, pool %+v; want no more than the pool holds, none acquired", n, st)
	}
}
