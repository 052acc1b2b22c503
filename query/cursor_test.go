package query

import (
	"reflect"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

// pages reads a result page by page through next_cursor, n rows at a
// time, and returns every row; each truncated page must carry the hint.
func pages(t *testing.T, n int, page func(cursor string) (*Result, [][]any)) [][]any {
	t.Helper()
	var all [][]any
	cursor := ""
	for i := 0; ; i++ {
		res, rows := page(cursor)
		all = append(all, rows...)
		if !res.Truncated {
			if res.NextCursor != "" || res.Hint != "" {
				t.Fatalf("complete page: got cursor %q, hint %q, want none", res.NextCursor, res.Hint)
			}
			return all
		}
		if len(rows) != n || res.NextCursor == "" || !strings.Contains(res.Hint, "next_cursor") {
			t.Fatalf("page %d: %d rows, cursor %q, hint %q; want %d rows, a cursor and a hint", i, len(rows), res.NextCursor, res.Hint, n)
		}
		cursor = res.NextCursor
	}
}

// Caller-written SQL pages with a cursor like the structured tools: the
// pages together are the whole result, in its order.
func TestSQLCursorPages(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	const text = "SELECT id, status FROM readings WHERE id <= 23 ORDER BY id DESC"
	_, whole := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "lite", SQL: text, Limit: NoLimit})
	got := pages(t, 5, func(c string) (*Result, [][]any) {
		return collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "lite", SQL: text, Limit: 5, Cursor: c})
	})
	if len(whole) != 23 || !reflect.DeepEqual(got, whole) {
		t.Fatalf("pages: got %v, want %v", got, whole)
	}
	// Without ORDER BY the hint says the pages may move.
	res, _ := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "lite", SQL: "SELECT id FROM readings", Limit: 2})
	if !strings.Contains(res.Hint, "no ORDER BY") {
		t.Errorf("hint without ORDER BY: got %q, want the stable-order advice", res.Hint)
	}
	res, _ = collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "lite", SQL: text, Limit: 2})
	if strings.Contains(res.Hint, "no ORDER BY") {
		t.Errorf("hint with ORDER BY: got %q, want no stable-order advice", res.Hint)
	}
}

// A cursor belongs to its request and its server: another statement, other
// params, an edited cursor and another engine's cursor are refused.
func TestSQLCursorRefused(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	r := SQLRequest{Database: "lite", SQL: "SELECT id FROM readings WHERE id > ? ORDER BY id", Params: []any{1}, Limit: 3}
	res, _ := collectSQL(t, e, lakegate.Caller{}, r)
	other, _ := sqliteEngine(t, nil)
	body, sig, _ := strings.Cut(res.NextCursor, ".")
	for name, tc := range map[string]struct {
		e *Engine
		r SQLRequest
	}{
		"other SQL":    {e, SQLRequest{Database: "lite", SQL: "SELECT id FROM readings ORDER BY id", Cursor: res.NextCursor}},
		"other params": {e, SQLRequest{Database: "lite", SQL: r.SQL, Params: []any{2}, Cursor: res.NextCursor}},
		"edited":       {e, SQLRequest{Database: "lite", SQL: r.SQL, Params: r.Params, Cursor: body + "x." + sig}},
		"unsigned":     {e, SQLRequest{Database: "lite", SQL: r.SQL, Params: r.Params, Cursor: body}},
		"other server": {other, SQLRequest{Database: "lite", SQL: r.SQL, Params: r.Params, Cursor: res.NextCursor}},
	} {
		if _, err := tc.e.PrepareSQL(t.Context(), lakegate.Caller{}, tc.r); lakegate.KindOf(err) != lakegate.KindValidation {
			t.Errorf("%s: got %v, want validation_error", name, err)
		}
	}
	// The same request with another row cap continues.
	r.Cursor, r.Limit = res.NextCursor, 100
	if _, rows := collectSQL(t, e, lakegate.Caller{}, r); len(rows) == 0 || rows[0][0] != int64(5) {
		t.Errorf("continued with a larger cap: got %v, want from id 5", rows)
	}
}

// A structured query without order_by pages in its primary key's order,
// and a time series in its buckets': the pages are the whole result.
func TestStructuredCursorPages(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	q := Request{Database: "lite", Table: "devices", Limit: NoLimit}
	_, whole := collectQuery(t, e, lakegate.Caller{}, q)
	got := pages(t, 7, func(c string) (*Result, [][]any) {
		q.Limit, q.Cursor = 7, c
		return collectQuery(t, e, lakegate.Caller{}, q)
	})
	if len(whole) < 8 || !reflect.DeepEqual(got, whole) {
		t.Fatalf("query pages: got %d rows, want the %d of the whole", len(got), len(whole))
	}
	ts := TimeSeriesRequest{Database: "lite", Table: "readings", TimeColumn: "ts", Bucket: Bucket{Unit: "minute", Count: 1},
		Start: "2025-01-01T00:00:00Z", End: "2025-01-01T01:00:00Z", Limit: NoLimit}
	_, whole = collectTimeSeries(t, e, lakegate.Caller{}, ts)
	got = pages(t, 4, func(c string) (*Result, [][]any) {
		ts.Limit, ts.Cursor = 4, c
		return collectTimeSeries(t, e, lakegate.Caller{}, ts)
	})
	if len(whole) < 9 || !reflect.DeepEqual(got, whole) {
		t.Fatalf("time series pages: got %d rows, want the %d of the whole", len(got), len(whole))
	}
}
