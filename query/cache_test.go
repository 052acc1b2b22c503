package query

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
)

// cached runs r for c and says whether the rows came from the cache.
func cached(t *testing.T, e *Engine, c lakegate.Caller, r SQLRequest) ([][]any, bool) {
	t.Helper()
	res, rows, err := runSQL(t.Context(), e, c, r)
	if err != nil {
		t.Fatalf("%q: %v", r.SQL, err)
	}
	if res.Cache == nil {
		t.Fatalf("%q: no cache info with the cache on", r.SQL)
	}
	return rows, res.Cache.Hit
}

func TestResultCache(t *testing.T) {
	e, _ := sqliteEngine(t, &Options{ResultCacheTTL: time.Minute, ResultCacheBytes: 1 << 20, Access: map[string]config.RoleAccess{
		"analyst": {Tables: map[string][]string{"lite": {"readings"}}},
	}})
	alice := lakegate.Caller{Subject: "alice", Roles: []string{"reader"}}
	bob := lakegate.Caller{Subject: "bob", Roles: []string{"reader"}}
	analyst := lakegate.Caller{Subject: "carol", Roles: []string{"reader", "analyst"}}
	r := SQLRequest{Database: "lite", SQL: "SELECT id, device_id FROM readings WHERE id <= 3 ORDER BY id"}

	first, hit := cached(t, e, alice, r)
	if hit {
		t.Fatal("the first read was a hit")
	}
	again, hit := cached(t, e, alice, r)
	if !hit || !reflect.DeepEqual(first, again) {
		t.Fatalf("the same read again: hit %v, rows %v, want a hit with %v", hit, again, first)
	}
	// Same access, another subject: the same answer serves.
	if _, hit := cached(t, e, bob, r); !hit {
		t.Error("another subject with the same access missed")
	}
	// Other access (an access rule) never shares an entry.
	if _, hit := cached(t, e, analyst, r); hit {
		t.Error("a caller under an access rule was answered from another's entry")
	}
	// Another row cap, other parameters: other entries.
	r2 := r
	r2.Limit = 2
	if _, hit := cached(t, e, alice, r2); hit {
		t.Error("another row cap was a hit")
	}
	p := SQLRequest{Database: "lite", SQL: "SELECT id FROM readings WHERE id = ?", Params: []any{1.0}}
	cached(t, e, alice, p)
	p.Params = []any{2.0}
	if rows, hit := cached(t, e, alice, p); hit || fmt.Sprint(rows) != "[[2]]" {
		t.Errorf("other parameters: hit %v, rows %v", hit, rows)
	}
	// fresh reads now.
	fresh := r
	fresh.Fresh = true
	if _, hit := cached(t, e, alice, fresh); hit {
		t.Error("a fresh read was a hit")
	}
	// Ingest empties the database's entries: the next read sees the row.
	count := SQLRequest{Database: "lite", SQL: "SELECT count(*) FROM feed"}
	before, _ := cached(t, e, alice, count)
	if _, err := e.Insert(t.Context(), lakegate.Caller{}, "lite", "feed", []map[string]any{{"id": 1000.0, "device": 1.0, "v": 1.0}}); err != nil {
		t.Fatal(err)
	}
	after, hit := cached(t, e, alice, count)
	if hit || fmt.Sprint(after) == fmt.Sprint(before) {
		t.Errorf("after an ingest: hit %v, count %v (before %v)", hit, after, before)
	}
	// A structured query and a time series are kept too.
	q := Request{Database: "lite", Table: "readings", Columns: cols("id"), Limit: 5}
	for i, want := range []bool{false, true} {
		res, _, err := runQuery(t.Context(), e, alice, q)
		if err != nil || res.Cache == nil || res.Cache.Hit != want || (want && res.NextCursor == "") {
			t.Errorf("query %d: %+v %v, want hit %v and a cursor", i, res, err, want)
		}
	}
	st := e.CacheStats()
	if st.Hits != 3 || st.Entries == 0 || st.Bytes <= 0 || st.Bytes > st.MaxBytes {
		t.Errorf("stats %+v", st)
	}
	// A result over an entry's bound is not kept.
	wide := SQLRequest{Database: "lite", SQL: "SELECT id, printf('%.2000d', id) AS pad FROM readings", Limit: 1000}
	cached(t, e, alice, wide)
	if _, hit := cached(t, e, alice, wide); hit {
		t.Error("a 2 MB result was kept")
	}
}

func TestResultCacheOff(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	res, _, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: "lite", SQL: "SELECT 1"})
	if err != nil || res.Cache != nil {
		t.Errorf("with the cache off: %+v %v, want no cache info", res, err)
	}
}

// The bounds: the least recently used entries go, a subject's own first
// when it is over its quarter; an entry past its TTL is gone.
func TestResultCacheBounds(t *testing.T) {
	c := newResultCache(time.Minute, 4000) // 1000 per subject
	now := time.Now()
	put := func(n byte, subject string, size int64) {
		c.put(&cacheEntry{key: [32]byte{n}, subject: subject, db: "d", at: now, size: size}, c.generation("d"))
	}
	has := func(n byte) bool { return c.get([32]byte{n}, now) != nil }
	put(1, "a", 600)
	put(2, "a", 600) // a is over its 1000: its older entry goes
	if has(1) || !has(2) {
		t.Errorf("per subject: 1 %v 2 %v, want only 2", has(1), has(2))
	}
	put(3, "b", 900)
	put(4, "c", 900)
	put(5, "d", 900)
	has(2)           // 2 used: 3 is now the least recent
	put(6, "e", 900) // 4,200 > 4,000: the least recent goes
	if has(3) || !has(2) || !has(6) {
		t.Errorf("in all: 3 %v 2 %v 6 %v, want 3 gone", has(3), has(2), has(6))
	}
	if st := (&Engine{cache: c}).CacheStats(); st.Bytes > 4000 || st.Evictions != 2 {
		t.Errorf("stats %+v", st)
	}
	if c.get([32]byte{6}, now.Add(2*time.Minute)) != nil {
		t.Error("an entry past its TTL was answered")
	}
	gen := c.generation("d")
	c.forget("d")
	if st := (&Engine{cache: c}).CacheStats(); st.Entries != 0 || st.Bytes != 0 {
		t.Errorf("after forget: %+v", st)
	}
	// A read that began before the forget keeps nothing: its rows may be
	// older than the ingest that forgot.
	c.put(&cacheEntry{key: [32]byte{7}, subject: "a", db: "d", at: now, size: 10}, gen)
	if c.get([32]byte{7}, now) != nil {
		t.Error("a read begun before a forget was kept")
	}
	if newResultCache(0, 1) != nil || newResultCache(time.Second, 0) != nil {
		t.Error("a cache with no TTL or no bytes is on")
	}
}

// An ingest on one server empties the entries of the database on another
// (NOTIFY), and PostgreSQL roles never share an entry.
func TestResultCacheAcrossServers(t *testing.T) {
	if os.Getenv(pgEnv) == "" {
		t.Skip("needs PostgreSQL")
	}
	other := "lakegate_test_cache_other"
	if err := pgtest.Role(t.Context(), pgTestURL(os.Getenv(pgEnv)), other, "feed"); err != nil {
		t.Fatal(err)
	}
	opts := &Options{ResultCacheTTL: time.Minute, ResultCacheBytes: 1 << 20, Access: map[string]config.RoleAccess{
		"other": {PGRole: other, Tables: map[string][]string{"pg": {"feed"}}},
	}}
	a, b := pgEngine(t, opts), pgEngine(t, opts)
	ingest := func(id float64) {
		t.Helper()
		if _, err := b.Insert(t.Context(), lakegate.Caller{}, "pg", "feed", []map[string]any{{"id": id, "device": 1.0, "v": 1.0}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		admin, err := pgx.Connect(context.Background(), pgTestURL(os.Getenv(pgEnv)))
		if err != nil {
			t.Error(err)
			return
		}
		defer admin.Close(context.Background())
		if _, err := admin.Exec(context.Background(), "DELETE FROM feed WHERE id = 2000"); err != nil {
			t.Error(err)
		}
	})
	testutil.Eventually(t, 10*time.Second, "a to listen", func() bool {
		st := a.TailStats()
		return len(st) == 1 && st[0].Listening
	})
	count := SQLRequest{Database: "pg", SQL: "SELECT count(*) FROM feed"}
	alice := lakegate.Caller{Subject: "alice", Roles: []string{"reader"}}
	before, _ := cached(t, a, alice, count)
	if _, hit := cached(t, a, alice, count); !hit {
		t.Fatal("the second read missed")
	}
	ingest(2000)
	testutil.Eventually(t, 10*time.Second, "the other server's ingest to empty the entry", func() bool { return a.CacheStats().Entries == 0 })
	after, hit := cached(t, a, alice, count)
	if hit || fmt.Sprint(after) == fmt.Sprint(before) {
		t.Errorf("after the other's ingest: hit %v, %v (before %v)", hit, after, before)
	}
	// Another PostgreSQL role: its own entry.
	if _, hit := cached(t, a, lakegate.Caller{Subject: "olga", Roles: []string{"reader", "other"}}, count); hit {
		t.Error("a caller under another PostgreSQL role was answered from the cache")
	}
	if _, hit := cached(t, a, alice, count); !hit {
		t.Error("alice's entry is gone")
	}
}
