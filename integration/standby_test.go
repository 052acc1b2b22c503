package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/query"
)

// standbyURL is the hot standby of the test database's server, at the
// test database (with-postgres.sh makes it), or the test skips.
func standbyURL(t *testing.T) string {
	t.Helper()
	raw := os.Getenv("LAKEGATE_TEST_STANDBY_URL")
	if raw == "" {
		t.Skip("LAKEGATE_TEST_STANDBY_URL is not set: make test starts a standby")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + testDB
	return u.String()
}

// asLogin is raw with the user pgtest.Login, which replication brings to
// the standby.
func asLogin(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(pgtest.Login)
	return u.String()
}

// Reads go to a healthy standby and fall back to the primary when it
// lags or stops; writes always go to the primary.
func TestStandbyReads(t *testing.T) {
	standby := standbyURL(t)
	direct, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Exec(t.Context(), "CREATE TABLE standby_ingest (id int PRIMARY KEY, note text)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = direct.Exec(context.Background(), "DROP TABLE IF EXISTS standby_ingest")
		direct.Close(context.Background())
	})
	e := start(t, envOptions{config: func(c *config.Config) {
		c.Databases[0].ReadURLs = []string{asLogin(t, standby)}
		// Not tighter: other packages' tests write to the same server
		// meanwhile, and a loaded machine replays them late.
		c.MaxStandbyLag = config.Duration(5 * time.Second)
	}})
	admin := e.connect(t, token("ops", "admin"))
	// inRecovery asks the connection that serves a read whether it is a
	// standby.
	inRecovery := func() bool {
		t.Helper()
		var out struct{ Rows [][]any }
		res := callJSON(t, admin, "run_sql", map[string]any{"database": "iot", "sql": "SELECT pg_is_in_recovery() AS standby"}, &out)
		if res.IsError || len(out.Rows) != 1 {
			t.Fatalf("run_sql: %v", res.Content)
		}
		return out.Rows[0][0] == true
	}
	state := func() query.StandbyState {
		st := e.engine.StandbyStats()
		if len(st) != 1 {
			t.Fatalf("standby stats: %+v", st)
		}
		return st[0].State
	}
	awaitState := func(want query.StandbyState) {
		t.Helper()
		if !testutil.Within(30*time.Second, func() bool { return state() == want }) {
			t.Fatalf("standby state %s, want %s: %+v", state(), want, e.engine.StandbyStats())
		}
	}
	awaitState(query.StandbyOK)
	for range 3 {
		if !inRecovery() {
			t.Fatal("a read with a healthy standby was served by the primary")
		}
	}
	// /ready reports it.
	resp, err := http.Get(e.base + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Status   string
		Standbys []query.StandbyStats
	}
	err = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if err != nil || ready.Status != "ready" || len(ready.Standbys) != 1 || ready.Standbys[0].State != query.StandbyOK {
		t.Errorf("/ready: %+v %v", ready, err)
	}

	// Writes go to the primary.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", e.base+"/data/iot/standby_ingest", strings.NewReader(`[{"id": 1, "note": "to the primary"}]`))
	if resp, err := httpClient(token("loader", "writer")).Do(req); err != nil || resp.StatusCode != http.StatusOK {
		b := []byte{}
		if resp != nil {
			b, _ = io.ReadAll(resp.Body)
		}
		t.Fatalf("ingest with a standby configured: %v %v %s", resp, err, b)
	}

	// A standby whose replay is paused falls past the lag bound: the
	// primary reads.
	sb, err := pgx.Connect(t.Context(), standby)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(t.Context())
	if _, err := sb.Exec(t.Context(), "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	for range 3 { // WAL to replay, and a replay timestamp that ages
		if _, err := e.pool.Exec(t.Context(), "UPDATE standby_ingest SET note = note || '.'"); err != nil {
			t.Fatal(err)
		}
	}
	awaitState(query.StandbyLagging)
	if inRecovery() {
		t.Error("a read went to a standby past the lag bound")
	}
	if _, err := sb.Exec(t.Context(), "SELECT pg_wal_replay_resume()"); err != nil {
		t.Fatal(err)
	}
	awaitState(query.StandbyOK)

	// A standby that stops: reads carry on at the primary, with no error.
	ctl := os.Getenv("LAKEGATE_TEST_STANDBY_CTL")
	if ctl == "" {
		return
	}
	sb.Close(t.Context())
	if out, err := exec.Command(ctl, "stop").CombinedOutput(); err != nil {
		t.Fatalf("stop the standby: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(ctl, "start").Run() })
	for range 3 {
		if inRecovery() {
			t.Fatal("a read was served by a stopped standby")
		}
	}
	awaitState(query.StandbyDown)
	if out, err := exec.Command(ctl, "start").CombinedOutput(); err != nil {
		t.Fatalf("start the standby: %v %s", err, out)
	}
	// Fresh WAL for it to stream and replay.
	if _, err := e.pool.Exec(t.Context(), "UPDATE standby_ingest SET note = note || '.'"); err != nil {
		t.Fatal(err)
	}
	awaitState(query.StandbyOK)
	if !inRecovery() {
		t.Error("the standby is back but the primary reads")
	}
}

// TestStandbyFreshness: every read says how fresh its rows are. From a
// standby whose replay is paused behind its primary, lag_s grows past a
// second and as_of stays at the last replayed commit, and the text the
// model reads says so; once it has replayed all, as_of is now again.
func TestStandbyFreshness(t *testing.T) {
	standby := standbyURL(t)
	e := start(t, envOptions{config: func(c *config.Config) {
		c.Databases[0].ReadURLs = []string{asLogin(t, standby)}
		c.MaxStandbyLag = config.Duration(time.Hour) // the paused standby keeps the reads
	}})
	tok := token("ops", "admin") // pg_is_in_recovery is server information
	type fresh struct {
		Rows  [][]any
		AsOf  time.Time `json:"as_of"`
		LagS  float64   `json:"lag_s"`
		asked time.Time
	}
	read := func() fresh {
		t.Helper()
		f := fresh{asked: time.Now()}
		code, body := post(t, e.base+"/rest/sql", tok, `{"database":"iot","sql":"SELECT pg_is_in_recovery() AS standby"}`)
		if err := json.Unmarshal([]byte(body), &f); err != nil || code != http.StatusOK || len(f.Rows) != 1 {
			t.Fatalf("read: %d %v %s", code, err, body)
		}
		return f
	}
	onStandby := func(f fresh) bool { return f.Rows[0][0] == true }
	testutil.Eventually(t, 30*time.Second, "a read on the standby with little lag", func() bool { f := read(); return onStandby(f) && f.LagS <= 1 })
	if f := read(); f.AsOf.Before(f.asked.Add(-2 * time.Second)) {
		t.Errorf("a standby that replayed all it received: got as_of %v for a read at %v, want now", f.AsOf, f.asked)
	}

	sb, err := pgx.Connect(t.Context(), standby)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	if _, err := sb.Exec(t.Context(), "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sb.Exec(context.Background(), "SELECT pg_wal_replay_resume()") })
	if _, err := e.pool.Exec(t.Context(), "CREATE TABLE IF NOT EXISTS freshness_probe (n int); INSERT INTO freshness_probe VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.pool.Exec(context.Background(), "DROP TABLE IF EXISTS freshness_probe") })
	var behind fresh
	// Two seconds behind, so that as_of is a second before the read
	// whatever the request's own latency (a lag just over one second put
	// as_of a few milliseconds after asked - 1s).
	testutil.Eventually(t, 30*time.Second, "a read on the standby lagging", func() bool { behind = read(); return onStandby(behind) && behind.LagS > 2 })
	if !behind.AsOf.Before(behind.asked.Add(-time.Second)) {
		t.Errorf("got as_of %v, lag_s %.1f for a read at %v, want as_of the lag before it", behind.AsOf, behind.LagS, behind.asked)
	}
	res, err := e.connect(t, tok).CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql",
		Arguments: map[string]any{"database": "iot", "sql": "SELECT pg_is_in_recovery() AS standby"}})
	if err != nil || res.IsError {
		t.Fatalf("run_sql: %v %v", res, err)
	}
	if text := res.Content[0].(*mcpsdk.TextContent).Text; !strings.Contains(text, "read from a standby") {
		t.Errorf("got %q, want the answer to say it is from a standby behind the primary", text)
	}
	if _, err := sb.Exec(t.Context(), "SELECT pg_wal_replay_resume()"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "a read on the standby with little lag", func() bool { f := read(); return onStandby(f) && f.LagS <= 1 })
}
