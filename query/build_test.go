package query

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

// cols makes a select list of plain columns.
func cols(names ...string) []Select {
	out := make([]Select, len(names))
	for i, n := range names {
		out[i] = Select{Column: n}
	}
	return out
}

func TestBuildEngine(t *testing.T) {
	e, _ := sqliteEngine(t, &Options{DefaultLimit: 7, MaxLimit: 50})
	r := Request{Database: "lite", Table: `We"ird Table`, Columns: cols("select", `We"ird`),
		Filters: []Filter{{Column: "Mixed", Op: "=", Value: "x"}}, OrderBy: []Order{{Column: "select", Desc: true}}}
	s, err := e.PrepareQuery(t.Context(), lakegate.Caller{}, r)
	if err != nil {
		t.Fatal(err)
	}
	want := `SELECT "select", "We""ird" FROM "We""ird Table" WHERE "Mixed" = ? ORDER BY "select" DESC LIMIT 7`
	if s.SQL != want || !reflect.DeepEqual(s.Args(), []any{"x"}) || s.Limit != 7 || s.Database != "lite" {
		t.Errorf("got %s %v (limit %d, database %q), want %s [x] (limit 7, lite)", s.SQL, s.Args(), s.Limit, s.Database, want)
	}
	res, rows, err := Collect(t.Context(), s, collectBytes)
	if err != nil {
		t.Fatal(err)
	}
	if res.SQL != want || !reflect.DeepEqual(rows, [][]any{{int64(1), "a"}}) || res.Truncated || res.RowCount != 1 || res.NextCursor != "" {
		t.Errorf("got %s %v %v %d cursor %q, want %s [[1 a]] false 1 and no cursor", res.SQL, rows, res.Truncated, res.RowCount, res.NextCursor, want)
	}

	limits := []struct {
		name  string
		limit int
		want  int
	}{
		{"default", 0, 7},
		{"explicit", 12, 12},
		{"the maximum", 50, 50},
		{"no limit is the maximum", NoLimit, 50},
	}
	for _, tt := range limits {
		t.Run("limit "+tt.name, func(t *testing.T) {
			s, err := e.PrepareQuery(t.Context(), lakegate.Caller{}, Request{Database: "lite", Table: "readings", Columns: cols("id"), Limit: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			if s.Limit != tt.want || !strings.HasSuffix(s.SQL, " LIMIT "+strconv.Itoa(tt.want)) {
				t.Errorf("got limit %d (sql %s), want %d", s.Limit, s.SQL, tt.want)
			}
			res, rows, err := Collect(t.Context(), s, collectBytes)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != tt.want || res.RowCount != tt.want || !res.Truncated {
				t.Errorf("got %d rows (count %d, truncated %v), want %d truncated", len(rows), res.RowCount, res.Truncated, tt.want)
			}
		})
	}

	errs := []struct {
		name string
		r    Request
		want lakegate.Kind
	}{
		{"unknown db", Request{Database: "x", Table: "readings"}, lakegate.KindNotFound},
		// As in SQL: a mistake in the request, not a missing resource.
		{"unknown table", Request{Database: "lite", Table: "readingz"}, lakegate.KindValidation},
		{"limit too big", Request{Database: "lite", Table: "readings", Limit: 51}, lakegate.KindValidation},
		{"negative limit", Request{Database: "lite", Table: "readings", Limit: -2}, lakegate.KindValidation},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.PrepareQuery(t.Context(), lakegate.Caller{}, tt.r)
			wantKind(t, err, tt.want)
		})
	}
}

func TestQueryOps(t *testing.T) {
	engines := dialectEngines(t)
	tests := []struct {
		name    string
		filters []Filter
		want    []any // ids, ascending
	}{
		{"=", []Filter{{Column: "id", Op: "=", Value: 3.0}}, []any{int64(3)}},
		{"!= and <", []Filter{{Column: "id", Op: "!=", Value: 2.0}, {Column: "id", Op: "<", Value: 4.0}}, []any{int64(1), int64(3)}},
		{"<= and >=", []Filter{{Column: "id", Op: "<=", Value: 3.0}, {Column: "id", Op: ">=", Value: json.Number("2")}}, []any{int64(2), int64(3)}},
		{">", []Filter{{Column: "id", Op: ">", Value: 998.0}, {Column: "id", Op: "<", Value: 1001.0}}, []any{int64(999), int64(1000)}},
		{"in", []Filter{{Column: "id", Op: "in", Value: []any{5.0, 1.0, 77777.0}}}, []any{int64(1), int64(5)}},
		{"not_in", []Filter{{Column: "id", Op: "<", Value: 5.0}, {Column: "id", Op: "not_in", Value: []any{1.0, 2.0}}}, []any{int64(3), int64(4)}},
		{"between", []Filter{{Column: "id", Op: "between", Value: []any{10.0, 12.0}}}, []any{int64(10), int64(11), int64(12)}},
		{"like", []Filter{{Column: "id", Op: "<", Value: 200.0}, {Column: "note", Op: "like", Value: "maintenance window 6"}}, []any{int64(97)}},
		{"ilike", []Filter{{Column: "id", Op: "<", Value: 200.0}, {Column: "note", Op: "ilike", Value: "MAINTENANCE WINDOW 6"}}, []any{int64(97)}},
		{"is_null", []Filter{{Column: "id", Op: "<", Value: 30.0}, {Column: "power_w", Op: "is_null", Value: nil}}, []any{int64(13), int64(26)}},
		{"is_not_null", []Filter{{Column: "id", Op: "<", Value: 3.0}, {Column: "power_w", Op: "is_not_null", Value: nil}}, []any{int64(1), int64(2)}},
		{"timestamp", []Filter{{Column: "ts", Op: "<", Value: "2025-01-01T00:00:09Z"}}, nil}, // dialect-specific, checked below
		{"text status", []Filter{{Column: "id", Op: "<", Value: 7.0}, {Column: "status", Op: "=", Value: "fail"}}, []any{int64(5)}},
	}
	for _, en := range engines {
		for _, tt := range tests {
			t.Run(en.db+" "+tt.name, func(t *testing.T) {
				res, rows := collectQuery(t, en.e, lakegate.Caller{}, Request{Database: en.db, Table: "readings",
					Columns: cols("id"), Filters: tt.filters, OrderBy: []Order{{Column: "id"}}, Limit: 100})
				var got []any
				for _, r := range rows {
					got = append(got, r[0])
				}
				want := tt.want
				if tt.name == "timestamp" {
					// demo readings are a minute apart, the PostgreSQL fixture 3 s.
					want = []any{int64(1), int64(2)}
					if en.db == "lite" {
						want = nil
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("got %v, want %v (sql %s)", got, want, res.SQL)
				}
			})
		}
	}
}

func TestCursor(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	r := Request{Database: "lite", Table: "readings", Columns: cols("id"), OrderBy: []Order{{Column: "id"}}, Limit: 10}
	res, _ := collectQuery(t, e, lakegate.Caller{}, r)
	c := res.NextCursor
	if c == "" || !res.Truncated {
		t.Fatalf("got cursor %q (truncated %v), want one for a truncated page", c, res.Truncated)
	}
	r.Cursor = c
	r.Limit = 20 // the page size may change
	if start, _, err := e.requestStart(r); err != nil || start.offset != 0 || len(start.after) != 1 || start.after[0] != json.Number("10") {
		t.Errorf("got %+v %v, want the page after id 10", start, err)
	}
	last, _ := collectQuery(t, e, lakegate.Caller{}, Request{Database: "lite", Table: "readings", Columns: cols("id"),
		Filters: []Filter{{Column: "id", Op: "<=", Value: 10.0}}, Limit: 10})
	if last.NextCursor != "" || last.Truncated {
		t.Errorf("got cursor %q (truncated %v), want none for a complete page", last.NextCursor, last.Truncated)
	}
	other := Request{Database: "lite", Table: "readings", Columns: cols("id", "ts"), Cursor: c}
	if _, _, err := e.requestStart(other); lakegate.KindOf(err) != lakegate.KindValidation {
		t.Errorf("cursor replayed on another request: got %v, want validation_error", err)
	}
	for _, bad := range []Request{{Cursor: "!!"}, {Cursor: "e30"}, {Cursor: c, Offset: 5}, {Offset: -1}} {
		if _, _, err := e.requestStart(bad); lakegate.KindOf(err) != lakegate.KindValidation {
			t.Errorf("%+v: got %v, want validation_error", bad, err)
		}
	}
}

// TestQueryFeatures runs joins, aggregates, groups and paging on both
// dialects and compares with hand-written SQL on the same data.
func TestQueryFeatures(t *testing.T) {
	engines := dialectEngines(t)
	for _, en := range engines {
		t.Run(en.db, func(t *testing.T) {
			r := Request{Database: en.db, Table: "readings",
				Columns: []Select{{Column: "devices.site"}, {Agg: "count", As: "n"}, {Agg: "max", Column: "temperature", As: "hi"}},
				Joins:   []Join{{Table: "devices"}},
				Filters: []Filter{{Or: []Filter{{Column: "status", Op: "=", Value: "ok"}, {Column: "readings.id", Op: "<", Value: 100.0}}}},
				GroupBy: []string{"devices.site"}, Having: []Filter{{Agg: "count", Op: ">", Value: 1.0}},
				OrderBy: []Order{{Column: "n", Desc: true}, {Column: "site"}}}
			got, gotRows := collectQuery(t, en.e, lakegate.Caller{}, r)
			_, wantRows := collectSQL(t, en.e, lakegate.Caller{}, SQLRequest{Database: en.db, SQL: `SELECT d.site, count(*) AS n, max(r.temperature) AS hi
				FROM readings r JOIN devices d ON r.device_id = d.id WHERE r.status = 'ok' OR r.id < 100
				GROUP BY d.site HAVING count(*) > 1 ORDER BY n DESC, d.site`})
			if len(gotRows) == 0 || fmt.Sprint(gotRows) != fmt.Sprint(wantRows) {
				t.Errorf("got %v\nwant %v\n(sql %s)", gotRows, wantRows, got.SQL)
			}

			// Paging with the cursor visits every row once.
			page := Request{Database: en.db, Table: "readings", Columns: cols("id"), Filters: []Filter{{Column: "id", Op: "<=", Value: 25.0}},
				OrderBy: []Order{{Column: "id"}}, Limit: 10}
			var ids []any
			for n := 0; ; n++ {
				res, rows := collectQuery(t, en.e, lakegate.Caller{}, page)
				for _, row := range rows {
					ids = append(ids, row[0])
				}
				if res.NextCursor == "" || n > 5 {
					break
				}
				page.Cursor = res.NextCursor
			}
			if len(ids) != 25 || ids[0] != int64(1) || ids[24] != int64(25) {
				t.Errorf("paged ids: got %v", ids)
			}
		})
	}
}
