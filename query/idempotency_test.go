package query

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

func TestValidKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{"01J9Z3K8Q2W5E7R9T1Y3U5I7O9", true},
		{"YWJj+ZGVm/Zw==", true},
		{"batch:2026-11-02.1_a~b", true},
		{strings.Repeat("k", MaxKeyLen), true},
		{"", false},
		{strings.Repeat("k", MaxKeyLen+1), false},
		{"has space", false},
		{"quote\"", false},
		{"new\nline", false},
		{"ünïcode", false},
		{"semi;colon", false},
	}
	for _, tt := range tests {
		if got := ValidKey(tt.key); got != tt.want {
			t.Errorf("ValidKey(%q): got %v, want %v", tt.key, got, tt.want)
		}
	}
}

// keyEngines are the engines to run idempotency tests on: SQLite always,
// PostgreSQL when configured; each leaves sink and the key table as it
// found them.
func keyEngines(t *testing.T, opts *Options) map[string]*Engine {
	t.Helper()
	le, _ := sqliteEngine(t, opts)
	engines := map[string]*Engine{"lite": le}
	if os.Getenv(pgEnv) != "" {
		pe := pgEngine(t, opts)
		t.Cleanup(func() {
			// Not t.Context(): it is cancelled before cleanups run.
			pg := pe.sources["pg"].(*pgSource)
			_, _ = pg.pool.Exec(context.Background(), "DELETE FROM sink WHERE id >= 5000")
			_, _ = pg.pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgKeyTable)
		})
		engines["pg"] = pe
	}
	return engines
}

// idem keys a batch by its body, as the REST ingest does.
func idem(key, body string) Idempotency {
	h := sha256.Sum256([]byte(body))
	return Idempotency{Key: key, BodyHash: h[:]}
}

func sinkRows(ids ...int) []map[string]any {
	rows := make([]map[string]any, len(ids))
	for i, id := range ids {
		rows[i] = map[string]any{"id": float64(id), "t": "k"}
	}
	return rows
}

func sinkCount(t *testing.T, e *Engine, db string) int64 {
	t.Helper()
	_, rows := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT count(*) FROM sink WHERE id >= 5000"})
	n, ok := rows[0][0].(int64)
	if !ok {
		t.Fatalf("got count %#v, want an int64", rows[0][0])
	}
	return n
}

func TestInsertOnce(t *testing.T) {
	alice, bob := lakegate.Caller{Subject: "alice"}, lakegate.Caller{Subject: "bob"}
	for db, e := range keyEngines(t, nil) {
		t.Run(db, func(t *testing.T) {
			steps := []struct {
				name         string
				caller       lakegate.Caller
				rows         []map[string]any
				idem         Idempotency
				wantInserted int64
				wantReplayed bool
				wantErr      lakegate.Kind
				wantCount    int64
			}{
				{"first", alice, sinkRows(5000, 5001), idem("k1", "a"), 2, false, "", 2},
				{"retry replays", alice, sinkRows(5000, 5001), idem("k1", "a"), 2, true, "", 2},
				{"retry again replays", alice, sinkRows(5000, 5001), idem("k1", "a"), 2, true, "", 2},
				{"same key other body", alice, sinkRows(5002), idem("k1", "b"), 0, false, lakegate.KindValidation, 2},
				{"same key other subject", bob, sinkRows(5003), idem("k1", "c"), 1, false, "", 3},
				{"new key", alice, sinkRows(5004, 5005, 5006), idem("k2", "d"), 3, false, "", 6},
				// A batch that fails leaves no key behind: the key is free.
				{"failed batch", alice, sinkRows(5007, 5007), idem("k3", "e"), 0, false, lakegate.KindValidation, 6},
				{"key of the failed batch", alice, sinkRows(5007), idem("k3", "f"), 1, false, "", 7},
				{"bad key", alice, sinkRows(5008), idem("no spaces", "g"), 0, false, lakegate.KindValidation, 7},
			}
			for _, st := range steps {
				res, err := e.InsertOnce(t.Context(), st.caller, db, "sink", st.rows, st.idem)
				if st.wantErr != "" {
					wantKind(t, err, st.wantErr)
				} else if err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				if res.Inserted != st.wantInserted || res.Replayed != st.wantReplayed {
					t.Errorf("%s: got %+v, want inserted %d replayed %v", st.name, res, st.wantInserted, st.wantReplayed)
				}
				if n := sinkCount(t, e, db); n != st.wantCount {
					t.Errorf("%s: got %d rows in sink, want %d", st.name, n, st.wantCount)
				}
			}
			_, err := e.InsertOnce(t.Context(), alice, db, "sink", sinkRows(5009), idem("k1", "other"))
			if !errors.Is(err, ErrKeyReused) {
				t.Errorf("reused key: got %v, want ErrKeyReused in the chain", err)
			}
			tables, err := e.Tables(t.Context(), lakegate.Caller{}, db)
			if err != nil {
				t.Fatal(err)
			}
			for _, tb := range tables {
				if tb.Name == KeyTable {
					t.Errorf("the catalog lists %s, want it hidden", KeyTable)
				}
			}
		})
	}
}

func TestInsertOnceCatalogHidesKeyTable(t *testing.T) {
	le, path := sqliteEngine(t, nil)
	if _, err := le.InsertOnce(t.Context(), lakegate.Caller{}, "lite", "sink", sinkRows(5000), idem("k", "a")); err != nil {
		t.Fatal(err)
	}
	// A fresh engine loads the catalog with the key table present.
	fresh, err := Open(t.Context(), []config.Database{{Name: "lite", URL: "sqlite:" + path}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fresh.Close(context.Background()) }()
	tables, err := fresh.Tables(t.Context(), lakegate.Caller{}, "lite")
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == KeyTable {
			t.Errorf("the catalog lists %s, want it hidden", KeyTable)
		}
	}
	if _, err := fresh.Describe(t.Context(), lakegate.Caller{}, "lite", KeyTable); lakegate.KindOf(err) != lakegate.KindNotFound {
		t.Errorf("describe %s: got %v, want not_found", KeyTable, err)
	}
}

func TestInsertOnceExpiry(t *testing.T) {
	const ttl = time.Hour
	for db, e := range keyEngines(t, &Options{KeyTTL: ttl}) {
		t.Run(db, func(t *testing.T) {
			// The keys' clock, moved by the test rather than slept on, so
			// that no step can outlast the TTL on a slow machine.
			var skew atomic.Int64
			e.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			if _, err := e.InsertOnce(t.Context(), lakegate.Caller{}, db, "sink", sinkRows(5000), idem("old", "a")); err != nil {
				t.Fatal(err)
			}
			skew.Store(int64(2 * ttl))
			// Expired: the key is free again, even for another body.
			res, err := e.InsertOnce(t.Context(), lakegate.Caller{}, db, "sink", sinkRows(5001), idem("old", "b"))
			if err != nil || res.Replayed || res.Inserted != 1 {
				t.Fatalf("after expiry: got %+v %v, want 1 inserted, not replayed", res, err)
			}
			// and recorded anew.
			res, err = e.InsertOnce(t.Context(), lakegate.Caller{}, db, "sink", sinkRows(5001), idem("old", "b"))
			if err != nil || !res.Replayed {
				t.Errorf("retry of the new batch: got %+v %v, want a replay", res, err)
			}
			if n := sinkCount(t, e, db); n != 2 {
				t.Errorf("got %d rows, want 2", n)
			}
		})
	}
}

// Concurrent requests with one key: the database lets one insert and the
// others replay its answer.
func TestInsertOnceConcurrent(t *testing.T) {
	for db, e := range keyEngines(t, nil) {
		t.Run(db, func(t *testing.T) {
			const n = 8
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				inserted int
				errs     []error
			)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := e.InsertOnce(t.Context(), lakegate.Caller{Subject: "s"}, db, "sink", sinkRows(5000, 5001, 5002), idem("same", "body"))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						errs = append(errs, fmt.Errorf("call %d: %w", i, err))
					case res.Inserted != 3:
						errs = append(errs, fmt.Errorf("call %d: got %+v, want 3 rows", i, res))
					case !res.Replayed:
						inserted++
					}
				}()
			}
			wg.Wait()
			if len(errs) > 0 {
				t.Fatal(errors.Join(errs...))
			}
			if inserted != 1 {
				t.Errorf("got %d calls that inserted, want 1", inserted)
			}
			if c := sinkCount(t, e, db); c != 3 {
				t.Errorf("got %d rows, want 3", c)
			}
		})
	}
}

func TestInsertOnceSweep(t *testing.T) {
	const ttl = time.Hour
	e, path := sqliteEngine(t, &Options{KeyTTL: ttl})
	// The keys' clock, moved by the test rather than slept on.
	var skew atomic.Int64
	e.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	for i := range 3 {
		if _, err := e.InsertOnce(t.Context(), lakegate.Caller{}, "lite", "sink", sinkRows(5000+i), idem(fmt.Sprint("k", i), "a")); err != nil {
			t.Fatal(err)
		}
		// The key just recorded expires, and the next ingest finds the
		// sweep due.
		skew.Add(int64(2 * ttl))
	}
	db, err := sqlOpenRW(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+KeyTable).Scan(&n); err != nil {
		t.Fatal(err)
	}
	// Each ingest swept the keys expired before it: only the last remains.
	if n != 1 {
		t.Errorf("got %d keys left, want 1", n)
	}
}
