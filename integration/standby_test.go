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

	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
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
	admin := e.connect(t, token(t, "ops", "admin"))
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
		deadline := time.Now().Add(30 * time.Second)
		for state() != want {
			if time.Now().After(deadline) {
				t.Fatalf("standby state %s, want %s: %+v", state(), want, e.engine.StandbyStats())
			}
			time.Sleep(20 * time.Millisecond)
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
	if resp, err := httpClient(token(t, "loader", "writer")).Do(req); err != nil || resp.StatusCode != http.StatusOK {
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
