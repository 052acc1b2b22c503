package cluster

import (
	"context"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/lakegate/lakegate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testDSN makes an empty database for the test on the PostgreSQL of
// LAKEGATE_TEST_DATABASE_URL (make test starts one), dropped at the end.
func testDSN(t *testing.T) (dsn string, admin *pgx.Conn) {
	t.Helper()
	base := os.Getenv("LAKEGATE_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("LAKEGATE_TEST_DATABASE_URL is not set; run make test, which starts a PostgreSQL")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{"DROP DATABASE IF EXISTS lakegate_cluster_test WITH (FORCE)", "CREATE DATABASE lakegate_cluster_test"} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS lakegate_cluster_test WITH (FORCE)")
		admin.Close(ctx)
	})
	u, _ := url.Parse(base)
	u.Path = "/lakegate_cluster_test"
	return u.String(), admin
}

// replica is one Switch and the states it applied.
type replica struct {
	sw      *Switch
	applied chan bool
}

func open(t *testing.T, dsn string, initial bool) *replica {
	t.Helper()
	r := &replica{applied: make(chan bool, 64)}
	sw, err := Open(t.Context(), dsn, initial, func(on bool) { r.applied <- on }, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.sw = sw
	t.Cleanup(func() {
		if err := sw.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return r
}

// await waits for r to apply want, skipping earlier states.
func (r *replica) await(t *testing.T, want bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-r.applied:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("the replica did not apply %v", want)
		}
	}
}

func TestSwitchFollowsAcrossReplicas(t *testing.T) {
	dsn, admin := testDSN(t)
	a := open(t, dsn, true)
	a.await(t, true) // the first replica records its own
	b := open(t, dsn, false)
	b.await(t, true) // a later one adopts the recorded state

	if err := b.sw.Set(t.Context(), false, "root"); err != nil {
		t.Fatal(err)
	}
	a.await(t, false)
	b.await(t, false)
	c := open(t, dsn, true)
	c.await(t, false)

	// A replica whose listening connection is cut connects again and
	// catches up on the change it missed.
	var cut int
	if err := admin.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = 'lakegate_cluster_test'`, ApplicationName).Scan(&cut); err != nil || cut != 3 {
		t.Fatalf("terminated %d listeners (%v), want 3", cut, err)
	}
	if err := c.sw.Set(t.Context(), true, "root"); err != nil {
		t.Fatal(err)
	}
	a.await(t, true)
	b.await(t, true)
	// And follows notifications again after that.
	if err := a.sw.Set(t.Context(), false, "root"); err != nil {
		t.Fatal(err)
	}
	b.await(t, false)
	c.await(t, false)
}

func TestSwitchUnreachable(t *testing.T) {
	if _, err := Open(t.Context(), "postgres://nobody@host:notaport/none", true, func(bool) {}, nil); err == nil {
		t.Fatal("Open with an invalid cluster_dsn: no error")
	}
	dsn, admin := testDSN(t)
	r := open(t, dsn, true)
	if _, err := admin.Exec(t.Context(), "DROP DATABASE lakegate_cluster_test WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	err := r.sw.Set(t.Context(), false, "root")
	if lakegate.KindOf(err) != lakegate.KindUnavailable {
		t.Fatalf("Set with the database gone: got %v, want an unavailable error", err)
	}
	// A second Close is fine.
	if err := r.sw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
