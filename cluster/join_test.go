package cluster

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
)

// TestJoinLate: a replica whose cluster database does not answer at start
// serves on its own — its peers say why, its switch keeps its own state
// and refuses to be set — and joins as soon as the database answers: it
// registers with its advertised URL and adopts the shared switch.
func TestJoinLate(t *testing.T) {
	dsn, _ := testDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testutil.NewProxy(t, u.Host)
	u.Host = proxy.Addr
	late := u.String()

	a := open(t, dsn, false) // a replica already in the cluster: MCP off
	a.await(t, false)
	p, err := OpenPeers(t.Context(), late, []byte(testSecret), nil)
	if err != nil {
		t.Fatalf("OpenPeers with the cluster database down: %v, want a replica on its own", err)
	}
	defer func() {
		if err := p.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if err := p.Joined(); lakegate.KindOf(err) != lakegate.KindUnavailable {
		t.Fatalf("Joined while the database is down: got %v, want why not", err)
	}
	if err := p.Advertise(t.Context(), "http://127.0.0.1:9"); err != nil {
		t.Fatalf("Advertise before joining: %v", err)
	}
	b := open(t, late, true)
	if err := b.sw.Set(t.Context(), true, "root"); lakegate.KindOf(err) != lakegate.KindUnavailable {
		t.Fatalf("Set while the database is down: got %v, want unavailable", err)
	}

	proxy.Start(t)
	testutil.Eventually(t, 15*time.Second, "the replica to join once the database answers", func() bool { return p.Joined() == nil })
	b.await(t, false) // adopted the shared state
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var got string
	if err := conn.QueryRow(t.Context(), `SELECT url FROM lakegate_cluster_replicas WHERE prefix = $1`, p.Prefix()).Scan(&got); err != nil || got != "http://127.0.0.1:9" {
		t.Fatalf("the replica's row: got %q (%v), want its advertised URL", got, err)
	}
	if err := a.sw.Set(t.Context(), true, "root"); err != nil {
		t.Fatal(err)
	}
	b.await(t, true) // and follows it
}
