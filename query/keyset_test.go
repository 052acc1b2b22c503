package query

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

// Keyset paging on both dialects: for orders of every kind (descending,
// mixed directions, nullable columns with their NULLs first or last,
// keys the request does not select, groups ordered by an aggregate, a
// join), the pages after the first start after the last row's keys, not
// at an offset, and together they are the whole result, each row once.
func TestKeysetPaging(t *testing.T) {
	engines := dialectEngines(t)
	for _, en := range engines {
		for _, tc := range []struct {
			name string
			r    Request
		}{
			{"descending, keys not selected", Request{Table: "readings", Columns: cols("device_id", "temperature"), OrderBy: []Order{{Column: "ts", Desc: true}}}},
			{"nullable, its default place", Request{Table: "readings", Columns: cols("id", "power_w"), OrderBy: []Order{{Column: "power_w"}}}},
			{"nullable, mixed directions and places", Request{Table: "readings", Columns: cols("id", "note", "power_w"),
				OrderBy: []Order{{Column: "note", Nulls: "first"}, {Column: "power_w", Desc: true, Nulls: "last"}}}},
			{"descending nullable, its default place", Request{Table: "readings", Columns: cols("id", "note"), OrderBy: []Order{{Column: "note", Desc: true}}}},
			{"a filter, a float then the key", Request{Table: "readings", Columns: cols("id", "temperature"),
				Filters: []Filter{{Column: "status", Op: "=", Value: "ok"}}, OrderBy: []Order{{Column: "temperature"}}}},
			{"groups by an aggregate", Request{Table: "readings", Columns: []Select{{Column: "device_id"}, {Agg: "avg", Column: "temperature", As: "t"}},
				GroupBy: []string{"device_id", "status"}, OrderBy: []Order{{Column: "t", Desc: true}}}},
			{"groups with a having", Request{Table: "readings", Columns: []Select{{Column: "status"}, {Column: "device_id"}, {Agg: "count", As: "n"}},
				GroupBy: []string{"status", "device_id"}, Having: []Filter{{Agg: "count", Op: ">", Value: 1.0}}, OrderBy: []Order{{Column: "n"}}}},
			{"a left join", Request{Table: "readings", Columns: cols("devices.name", "readings.id"), Joins: []Join{{Table: "devices", Type: "left"}},
				OrderBy: []Order{{Column: "devices.name", Desc: true}}}},
			{"a join", Request{Table: "readings", Columns: cols("devices.site", "readings.id"), Joins: []Join{{Table: "devices"}},
				OrderBy: []Order{{Column: "devices.site"}, {Column: "readings.ts", Desc: true}}}},
		} {
			t.Run(en.db+"/"+tc.name, func(t *testing.T) {
				r := tc.r
				r.Database = en.db
				all := r
				all.Limit = NoLimit
				_, want := collectQuery(t, en.e, lakegate.Caller{}, all)
				if len(want) < 40 {
					t.Fatalf("only %d rows: a test that pages nothing", len(want))
				}
				// About a dozen pages whatever the table's size: SQLite
				// sorts the whole table again for each page.
				page := r
				page.Limit = max(37, len(want)/12)
				var got [][]any
				for n := 0; n < 1000; n++ {
					res, rows := collectQuery(t, en.e, lakegate.Caller{}, page)
					if n > 0 && strings.Contains(res.SQL, "OFFSET") {
						t.Fatalf("page %d went by offset: %s", n, res.SQL)
					}
					if len(res.Columns) != len(want[0]) || len(rows) > 0 && len(rows[0]) != len(want[0]) {
						t.Fatalf("page %d has %d columns, want %d (keys kept hidden)", n, len(res.Columns), len(want[0]))
					}
					got = append(got, rows...)
					if res.NextCursor == "" {
						break
					}
					page.Cursor = res.NextCursor
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("the pages (%d rows) are not the result (%d rows)", len(got), len(want))
				}
			})
		}
	}
}

// A page starts after the row the cursor names: rows inserted before it
// since the page before never shift it, and a row deleted at the cut
// skips nothing.
func TestKeysetStable(t *testing.T) {
	e, path := sqliteEngine(t, nil)
	r := Request{Database: "lite", Table: "readings", Columns: cols("id"), OrderBy: []Order{{Column: "ts"}}, Limit: 10}
	res, first := collectQuery(t, e, lakegate.Caller{}, r)
	db, err := sqlOpenRW(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A reading earlier than all, and the page's last row gone.
	if _, err := db.Exec(`INSERT INTO readings (id, device_id, ts, temperature, humidity, status) VALUES (-1, 1, '1999-01-01T00:00:00Z', 1, 1, 'ok')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM readings WHERE id = ?`, first[9][0]); err != nil {
		t.Fatal(err)
	}
	r.Cursor = res.NextCursor
	_, second := collectQuery(t, e, lakegate.Caller{}, r)
	_, want := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "lite", SQL: "SELECT id FROM readings ORDER BY ts, id LIMIT 10 OFFSET 10"})
	if fmt.Sprint(second) != fmt.Sprint(want) {
		t.Errorf("the second page: got %v, want %v (the rows after the first page's last)", second, want)
	}
}
