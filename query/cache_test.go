package query

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/query/sqlbuild"
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
	// A smaller row cap is answered from the entry; a larger one of a
	// cut result, other parameters: other entries.
	r2 := r
	r2.Limit = 2
	if rows, hit := cached(t, e, alice, r2); !hit || fmt.Sprint(rows) != "[[1 2] [2 3]]" {
		t.Errorf("a smaller row cap: hit %v, rows %v; want a hit with the first two", hit, rows)
	}
	r2.Limit = 3
	if _, hit := cached(t, e, alice, r2); !hit {
		t.Error("the same rows under another row cap missed")
	}
	r3 := r
	r3.SQL, r3.Limit = "SELECT id FROM readings ORDER BY id", 2
	cached(t, e, alice, r3)
	r3.Limit = 3
	if _, hit := cached(t, e, alice, r3); hit {
		t.Error("a larger row cap than a cut entry holds was a hit")
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
	if st.Hits != 5 || st.Entries == 0 || st.Bytes <= 0 || st.Bytes > st.MaxBytes {
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
	all := func(*cacheEntry) bool { return true }
	has := func(n byte) bool { return c.get([32]byte{n}, now, false, all) != nil }
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
	if c.get([32]byte{6}, now.Add(2*time.Minute), false, all) != nil {
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
	if c.get([32]byte{7}, now, false, all) != nil {
		t.Error("a read begun before a forget was kept")
	}
	// Two parts of one request that join past a subject's share are not
	// joined: the later replaces the earlier.
	small := newResultCache(time.Minute, 4000)
	row := []Cell{{Kind: CellInt, I: 1}}
	small.put(&cacheEntry{key: [32]byte{9}, subject: "a", db: "d", at: now, rows: [][]Cell{row}, res: Result{Truncated: true}, size: 900}, 0)
	small.put(&cacheEntry{key: [32]byte{9}, subject: "a", db: "d", at: now, rows: [][]Cell{row}, base: 1, size: 900}, 0)
	if st := (&Engine{cache: small}).CacheStats(); st.Bytes != 900 || st.Entries != 1 {
		t.Errorf("a join past the share: %+v, want the later part alone", st)
	}
	if ent := small.get([32]byte{9}, now, false, all); ent == nil || ent.base != 1 {
		t.Errorf("a join past the share: kept %+v, want the later part", ent)
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

// Pages of a paged result come from the entry of the request: a page
// asked with a cursor reads ahead, and the pages after it, a smaller row
// cap and a page cut short (CursorAt) are answered from it, each the rows
// the database would give. A keyset cursor whose row is not the entry's
// is not.
func TestResultCachePages(t *testing.T) {
	opts := func() *Options { return &Options{ResultCacheTTL: time.Minute, ResultCacheBytes: 4 << 20} }
	t.Run("sqlite", func(t *testing.T) {
		e, _ := sqliteEngine(t, opts())
		testCachePages(t, e, "lite", "printf('%.10000d', id)")
	})
	t.Run("postgres", func(t *testing.T) {
		if os.Getenv(pgEnv) == "" {
			t.Skip("needs PostgreSQL")
		}
		e := pgEngine(t, opts())
		// Once its LISTEN takes hold the engine forgets what it kept
		// (rows told before it were told to no one): wait for it.
		testutil.Eventually(t, 10*time.Second, "the engine to listen", func() bool {
			st := e.TailStats()
			return len(st) == 1 && st[0].Listening
		})
		testCachePages(t, e, "pg", "lpad(id::text, 10000, '0')")
	})
}

// testCachePages pages through db of e; pad is the id as 10,000 digits.
func testCachePages(t *testing.T, e *Engine, db, pad string) {
	alice := lakegate.Caller{Subject: "alice", Roles: []string{"reader"}}
	all, _ := collectSQL(t, e, alice, SQLRequest{Database: db, SQL: "SELECT id FROM readings WHERE id <= 40 ORDER BY id"})
	_, want := collectSQL(t, e, alice, SQLRequest{Database: db, SQL: "SELECT id FROM readings WHERE id <= 40 ORDER BY id", Fresh: true})
	if all.RowCount != 40 {
		t.Fatalf("fixture: %d rows, want 40", all.RowCount)
	}
	// page walks the request through its cursors, each page prepared
	// by prep, and says which pages were hits.
	page := func(prep func(cursor string) (*Stmt, error)) (got [][]any, hits []bool) {
		t.Helper()
		cursor := ""
		for range 100 {
			s, err := prep(cursor)
			if err != nil {
				t.Fatal(err)
			}
			res, rows, err := Collect(t.Context(), s, collectBytes)
			if err != nil {
				t.Fatal(err)
			}
			got, hits = append(got, rows...), append(hits, res.Cache.Hit)
			if !res.Truncated {
				return got, hits
			}
			cursor = res.NextCursor
		}
		t.Fatal("no last page")
		return nil, nil
	}
	sql := func(cursor string) (*Stmt, error) {
		return e.PrepareSQL(t.Context(), alice, SQLRequest{Database: db, SQL: "SELECT id FROM readings WHERE id <= 40 ORDER BY id DESC", Limit: 3, Cursor: cursor})
	}
	got, hits := page(sql)
	slices.Reverse(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("offset pages: %v, want %v", got, want)
	}
	// The first page and the second run, the second reading 10 pages
	// ahead; the page after them runs again, and reads the last ahead.
	wantHits := []bool{false, false, true, true, true, true, true, true, true, true, true, true, false, true}
	if !reflect.DeepEqual(hits, wantHits) {
		t.Errorf("offset pages' hits: %v, want %v…", hits, wantHits)
	}
	slices.Reverse(want)

	q := func(limit int) func(string) (*Stmt, error) {
		return func(cursor string) (*Stmt, error) {
			return e.PrepareQuery(t.Context(), alice, Request{Database: db, Table: "readings", Columns: cols("id"),
				Filters: []sqlbuild.Filter{{Column: "id", Op: "<=", Value: 40.0}}, Limit: limit, Cursor: cursor})
		}
	}
	got, hits = page(q(4))
	if !reflect.DeepEqual(got, want) || len(hits) != 10 || hits[1] || !hits[2] || !hits[9] {
		t.Fatalf("keyset pages: %v, hits %v; want %v, the third page on hits", got, hits, want)
	}
	// The second page again (its entry began after it), with a smaller
	// row cap: a hit, the same rows.
	s1, _ := q(4)("")
	r1, _, _ := Collect(t.Context(), s1, collectBytes)
	s2, _ := q(2)(r1.NextCursor)
	if res, rows, err := Collect(t.Context(), s2, collectBytes); err != nil || !res.Cache.Hit || fmt.Sprint(rows) != "[[5] [6]]" || !res.Truncated {
		t.Errorf("the second page with a row cap of 2: %+v %v %v, want a hit with [[5] [6]]", res, rows, err)
	}
	// A page cut short after 1 row of 2: its cursor's page is in the entry.
	if c, _ := s2.CursorAt(1); c == "" {
		t.Fatal("no cursor after a cut page")
	} else if s3, _ := q(3)(c); s3 != nil {
		if res, rows, err := Collect(t.Context(), s3, collectBytes); err != nil || !res.Cache.Hit || fmt.Sprint(rows) != "[[6] [7] [8]]" {
			t.Errorf("the page after a cut: %+v %v %v, want a hit with [[6] [7] [8]]", res, rows, err)
		}
	}
	// A cursor whose keys are not the entry's row at its place (made
	// here, as a result that moved would have) is not answered from it.
	moved := e.encodeCursor(pageStart{after: []any{json.Number("20")}, at: 9}, s1.hash)
	s4, err := q(2)(moved)
	if err != nil {
		t.Fatal(err)
	}
	if res, rows, err := Collect(t.Context(), s4, collectBytes); err != nil || res.Cache.Hit || fmt.Sprint(rows) != "[[21] [22]]" {
		t.Errorf("a cursor that does not fit the entry: %+v %v %v, want a miss with [[21] [22]]", res, rows, err)
	}
	// Wide rows: a page reads ahead only as far as an entry may hold,
	// and the pages after that run again.
	wide := func(cursor string) (*Stmt, error) {
		return e.PrepareSQL(t.Context(), alice, SQLRequest{Database: db, SQL: "SELECT id, " + pad + " AS pad FROM readings WHERE id <= 200 ORDER BY id",
			Limit: 20, Cursor: cursor})
	}
	got, hits = page(wide)
	n := 0
	for i, row := range got {
		if fmt.Sprint(row[0]) != fmt.Sprint(i+1) || len(fmt.Sprint(row[1])) != 10000 {
			t.Fatalf("wide row %d: %v…", i, fmt.Sprint(row[0]))
		}
		if hits[i/20] {
			n++
		}
	}
	if len(got) != 200 || n < 60 || hits[1] || !hits[2] || !slices.Contains(hits[3:], false) {
		t.Errorf("wide pages: %d rows, hits %v; want 200, pages 3 to 5 or so hits, then a run again", len(got), hits)
	}
	if st := e.CacheStats(); st.Bytes > st.MaxSubjectBytes {
		t.Errorf("the cache holds %d bytes, over a subject's %d", st.Bytes, st.MaxSubjectBytes)
	}
}

// Two entries of one request join when one's rows go on where the
// other's end, after the row its run began after.
func TestJoinedEntries(t *testing.T) {
	now := time.Now()
	row := func(i int64) []Cell { return []Cell{{Kind: CellInt, I: i}} }
	keys := []sqlbuild.Key{{Col: 0}}
	first := &cacheEntry{rows: [][]Cell{row(1), row(2)}, keys: keys, res: Result{Truncated: true}, at: now, size: 600}
	next := func(base int, lead ...any) *cacheEntry {
		return &cacheEntry{rows: [][]Cell{row(3)}, base: base, lead: lead, keys: keys, at: now.Add(time.Second), size: 550}
	}
	if j := joined(first, next(2, json.Number("2")), time.Minute); j == nil || len(j.rows) != 3 || j.base != 0 || !j.at.Equal(now) || j.size != 638 || j.res.Truncated {
		t.Errorf("after the first: %+v", j)
	}
	if j := joined(next(2, json.Number("2")), first, time.Minute); j == nil || len(j.rows) != 3 || j.base != 0 {
		t.Errorf("the first after: %+v", j)
	}
	for name, ent := range map[string]*cacheEntry{
		"another row before": next(2, json.Number("7")),
		"no row before":      next(2),
		"a gap":              next(3, json.Number("2")),
	} {
		if j := joined(first, ent, time.Minute); j != nil {
			t.Errorf("%s: joined", name)
		}
	}
	if joined(first, next(2, json.Number("2")), time.Millisecond) != nil {
		t.Error("joined an entry past its TTL")
	}
	whole := *first
	whole.res.Truncated = false
	if joined(&whole, next(2, json.Number("2")), time.Minute) != nil {
		t.Error("joined rows after a result's end")
	}
}

// Callers paging the same request at once share its entry, each walk
// whole and in order.
func TestResultCachePagesConcurrent(t *testing.T) {
	e, _ := sqliteEngine(t, &Options{ResultCacheTTL: time.Minute, ResultCacheBytes: 4 << 20})
	alice := lakegate.Caller{Subject: "alice", Roles: []string{"reader"}}
	_, want := collectSQL(t, e, alice, SQLRequest{Database: "lite", SQL: "SELECT id FROM readings WHERE id <= 60 ORDER BY id", Fresh: true})
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			var got [][]any
			cursor := ""
			for range 100 {
				var s *Stmt
				var err error
				if w%2 == 0 {
					s, err = e.PrepareSQL(t.Context(), alice, SQLRequest{Database: "lite", SQL: "SELECT id FROM readings WHERE id <= 60 ORDER BY id",
						Limit: 2 + w%3, Cursor: cursor})
				} else {
					s, err = e.PrepareQuery(t.Context(), alice, Request{Database: "lite", Table: "readings", Columns: cols("id"),
						Filters: []sqlbuild.Filter{{Column: "id", Op: "<=", Value: 60.0}}, Limit: 2 + w%3, Cursor: cursor})
				}
				if err != nil {
					errs <- err
					return
				}
				res, rows, err := Collect(t.Context(), s, collectBytes)
				if err != nil {
					errs <- err
					return
				}
				got = append(got, rows...)
				if !res.Truncated {
					break
				}
				cursor = res.NextCursor
			}
			if !reflect.DeepEqual(got, want) {
				errs <- fmt.Errorf("walker %d: %v", w, got)
				return
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if st := e.CacheStats(); st.Hits == 0 {
		t.Errorf("no page was a hit: %+v", st)
	}
}
