package integration

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakegate/lakegate/internal/testutil"
)

// TestNoisyNeighbour (make bench, LAKEGATE_BENCH_FAIR=1): one reader runs
// her maximum of queries at once (max_queries_per_subject, each held for
// as long as the test wants by a lock on devices, so they hold their
// workers and database connections without using the CPU), and another
// subject's point query is timed beside the same query on the idle server,
// in the same run. With the pool sized from the worker settings it should
// answer as if the server were idle.
func TestNoisyNeighbour(t *testing.T) {
	url := benchDatabase(t, "LAKEGATE_BENCH_FAIR")
	const (
		heavy  = 8 // the default max_queries_per_subject
		points = 300
	)
	p := startProc(t, buildBinary(t), benchEnv(url)...)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	client := newClient(t)
	bob := token("bob", "reader")
	point := func() time.Duration {
		body := []byte(`{"database":"bench","sql":"SELECT * FROM readings WHERE id = 4242"}`)
		req, _ := http.NewRequest("POST", p.base+"/rest/sql", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bob)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("point query: %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	p50 := func() time.Duration {
		d := make([]time.Duration, points)
		for i := range d {
			d[i] = point()
		}
		slices.Sort(d)
		return d[len(d)/2]
	}
	for range 50 { // warm up: connections, plans
		point()
	}
	idle := p50()

	release := lockDevices(t, pool)
	alice := token("alice", "reader")
	const marker = "noisy_neighbour"
	var answers []<-chan restAnswer
	for range heavy {
		answers = append(answers, sqlAsyncOn(client, p.base, alice, "bench", "SELECT count(*) AS n, '"+marker+"' AS m FROM devices"))
	}
	testutil.Eventually(t, 30*time.Second, "the heavy queries to run", func() bool { return activeQueries(t, pool, marker) == heavy })
	noisy := p50()
	release()
	for _, a := range answers {
		if r := <-a; r.err != nil || r.code != http.StatusOK {
			t.Errorf("alice's query: %d %v", r.code, r.err)
		}
	}
	t.Logf("noisy neighbour: bob's point query p50 %v on the idle server, %v while alice runs %d queries: ratio %.2f",
		idle.Round(time.Microsecond), noisy.Round(time.Microsecond), heavy, float64(noisy)/float64(idle))
}
