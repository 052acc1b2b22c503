package query

import (
	"fmt"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
)

// tailEngines are an engine per dialect with its database name, the
// re-check off (only lakegate's ingest wakes a tail) unless recheck.
func tailEngines(t *testing.T, recheck time.Duration) map[string]*Engine {
	le, _ := sqliteEngine(t, &Options{TailRecheck: recheck})
	out := map[string]*Engine{"lite": le}
	if pgAppURL != "" {
		out["pg"] = pgEngine(t, &Options{TailRecheck: recheck})
	}
	return out
}

// tail prepares r (waiting as it asks) and collects its rows.
func tail(t *testing.T, e *Engine, r TailRequest) (*Result, [][]any) {
	t.Helper()
	s, err := e.PrepareTail(t.Context(), lakegate.Caller{}, r)
	if err != nil {
		t.Fatalf("PrepareTail: %v", err)
	}
	res, rows, err := Collect(t.Context(), s, collectBytes)
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	return res, rows
}

// A tail answers the newest rows first, then what arrives after its
// cursor: at once when there is some, else when lakegate's ingest wakes
// it (the re-check is off), only the rows its filter keeps; the same
// cursor answers the same rows again.
func TestTail(t *testing.T) {
	for db, e := range tailEngines(t, -1) {
		t.Run(db, func(t *testing.T) {
			r := TailRequest{Database: db, Table: "feed", Columns: cols("id", "device"), Filters: []Filter{{Column: "device", Op: "=", Value: 1.0}}, Limit: 3}
			res, rows := tail(t, e, r)
			if fmt.Sprint(rows) != "[[22 1] [25 1] [28 1]]" || res.NextCursor == "" {
				t.Fatalf("the newest rows: %v (cursor %q), want device 1's last three, oldest first", rows, res.NextCursor)
			}
			r.Cursor = res.NextCursor
			again, rows := tail(t, e, r)
			if len(rows) != 0 || again.NextCursor != r.Cursor {
				t.Fatalf("nothing new: %v, cursor %q; want no rows and the same cursor", rows, again.NextCursor)
			}

			// A waiting tail, woken by rows of another device (it looks
			// and waits on) and then by its own.
			type answer struct {
				res  *Result
				rows [][]any
			}
			got := make(chan answer, 1)
			w := r
			w.Wait = 20 * time.Second
			start := time.Now()
			go func() {
				s, err := e.PrepareTail(t.Context(), lakegate.Caller{}, w)
				if err != nil {
					t.Error(err)
					got <- answer{}
					return
				}
				res, rows, err := Collect(t.Context(), s, collectBytes)
				if err != nil {
					t.Error(err)
				}
				got <- answer{res, rows}
			}()
			insert := func(id, device float64) {
				if _, err := e.Insert(t.Context(), lakegate.Caller{}, db, "feed", []map[string]any{{"id": id, "device": device, "v": 1.0}}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(200 * time.Millisecond) // let it wait (a row before is found at once anyway)
			insert(31, 2)
			select {
			case a := <-got:
				t.Fatalf("woken by another device's row, it answered %v", a.rows)
			case <-time.After(300 * time.Millisecond):
			}
			insert(34, 1)
			a := <-got
			if fmt.Sprint(a.rows) != "[[34 1]]" || time.Since(start) > w.Wait/2 {
				t.Fatalf("the waiting tail answered %v after %v, want the new row of device 1, woken before the wait ran out", a.rows, time.Since(start))
			}
			// Exactly once: the old cursor answers the row again, the new
			// one nothing.
			if _, rows := tail(t, e, r); fmt.Sprint(rows) != "[[34 1]]" {
				t.Errorf("the same cursor again: %v", rows)
			}
			r.Cursor = a.res.NextCursor
			if _, rows := tail(t, e, r); len(rows) != 0 {
				t.Errorf("after the new cursor: %v, want nothing", rows)
			}
		})
	}
}

// Rows another program writes reach a waiting tail through the re-check
// of its table.
func TestTailRecheck(t *testing.T) {
	e, path := sqliteEngine(t, &Options{TailRecheck: 50 * time.Millisecond})
	r := TailRequest{Database: "lite", Table: "feed", Columns: cols("id")}
	res, _ := tail(t, e, r)
	r.Cursor, r.Wait = res.NextCursor, 20*time.Second
	go func() {
		time.Sleep(200 * time.Millisecond)
		db, err := sqlOpenRW(path)
		if err != nil {
			t.Error(err)
			return
		}
		defer db.Close()
		if _, err := db.Exec("INSERT INTO feed VALUES (40, 0, 0)"); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	if _, rows := tail(t, e, r); fmt.Sprint(rows) != "[[40]]" || time.Since(start) > r.Wait/2 {
		t.Errorf("got %v after %v, want the row another program wrote, found before the wait ran out", rows, time.Since(start))
	}
}

// PostgreSQL: lakegate's ingest on one server wakes a tail waiting on
// another (NOTIFY in the ingest's transaction), the re-check off.
func TestTailAcrossServers(t *testing.T) {
	if pgAppURL == "" {
		t.Skip("PostgreSQL only")
	}
	a := pgEngine(t, &Options{TailRecheck: -1})
	b := pgEngine(t, &Options{TailRecheck: -1})
	r := TailRequest{Database: "pg", Table: "feed", Columns: cols("id")}
	res, _ := tail(t, b, r)
	r.Cursor, r.Wait = res.NextCursor, 20*time.Second
	go func() {
		time.Sleep(300 * time.Millisecond)
		if _, err := a.Insert(t.Context(), lakegate.Caller{}, "pg", "feed", []map[string]any{{"id": 1000.0, "device": 0.0}}); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	if _, rows := tail(t, b, r); fmt.Sprint(rows) != "[[1000]]" || time.Since(start) > r.Wait/2 {
		t.Errorf("got %v after %v, want the row the other server ingested, woken before the wait ran out", rows, time.Since(start))
	}
}

// A tail's answer shown in part (cut to a reader's budget) continues
// after the last row shown, the first answer (the newest rows) too.
func TestTailCursorAt(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	r := TailRequest{Database: "lite", Table: "feed", Columns: cols("id"), Limit: 5}
	s, err := e.PrepareTail(t.Context(), lakegate.Caller{}, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, rows, err := Collect(t.Context(), s, collectBytes); err != nil || fmt.Sprint(rows) != "[[26] [27] [28] [29] [30]]" {
		t.Fatalf("the newest rows: %v %v", rows, err)
	}
	r.Cursor, _ = s.CursorAt(2)
	if _, rows := tail(t, e, r); fmt.Sprint(rows) != "[[28] [29] [30]]" {
		t.Errorf("after the second row shown: %v, want the rows after 27", rows)
	}
}
