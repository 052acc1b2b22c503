package query

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/lakegate/lakegate"
)

// TestObjectEncoder: the REST object form streams the same rows Collect
// returns, with the summary after them.
func TestObjectEncoder(t *testing.T) {
	le, _ := sqliteEngine(t, nil)
	engines := map[string]*Engine{"lite": le}
	if pe := maybePG(t); pe != nil {
		engines["pg"] = pe
	}
	tests := []struct {
		name  string
		sql   string
		query *Request
		rows  int
		trunc bool
	}{
		{name: "rows", sql: "SELECT id, status, note, temperature, power_w FROM readings WHERE id <= 5 ORDER BY id", rows: 5},
		{name: "no rows", sql: "SELECT id, status FROM readings WHERE id < 0", rows: 0},
		{name: "truncated query", query: &Request{Table: "readings", Columns: cols("id", "note"), OrderBy: []Order{{Column: "id"}}, Limit: 3}, rows: 3, trunc: true},
	}
	for db, e := range engines {
		for _, tt := range tests {
			t.Run(db+" "+tt.name, func(t *testing.T) {
				var (
					s   *Stmt
					err error
				)
				if tt.query != nil {
					r := *tt.query
					r.Database = db
					s, err = e.PrepareQuery(t.Context(), lakegate.Caller{}, r)
				} else {
					s, err = e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: tt.sql})
				}
				if err != nil {
					t.Fatal(err)
				}
				want, wantRows, err := Collect(t.Context(), s, collectBytes)
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				enc := NewObjectEncoder(&buf)
				res, err := s.Run(t.Context(), enc)
				if err != nil {
					t.Fatal(err)
				}
				if enc.Written() != int64(buf.Len()) {
					t.Errorf("got Written %d, want %d", enc.Written(), buf.Len())
				}
				keys := objectKeys(t, buf.Bytes())
				if wantKeys := []string{"columns", "rows", "row_count", "truncated", "sql", "elapsed_ms", "as_of", "lag_s"}; tt.trunc {
					wantKeys = slices.Insert(wantKeys, 4, "next_cursor", "hint")
					if !reflect.DeepEqual(keys, wantKeys) {
						t.Errorf("got keys %v, want %v", keys, wantKeys)
					}
				} else if !reflect.DeepEqual(keys, wantKeys) {
					t.Errorf("got keys %v, want %v", keys, wantKeys)
				}
				var got struct {
					Columns    []ResultColumn `json:"columns"`
					Rows       []any          `json:"rows"`
					RowCount   int            `json:"row_count"`
					Truncated  bool           `json:"truncated"`
					NextCursor string         `json:"next_cursor"`
					SQL        string         `json:"sql"`
				}
				dec := json.NewDecoder(&buf)
				dec.UseNumber()
				if err := dec.Decode(&got); err != nil {
					t.Fatalf("got invalid JSON: %v", err)
				}
				if got.Rows == nil || len(got.Rows) != tt.rows {
					t.Fatalf("got rows %v, want %d (an array, never null)", got.Rows, tt.rows)
				}
				if exp := jsonRoundTrip(t, wantRows); !reflect.DeepEqual(got.Rows, exp) {
					t.Errorf("got rows\n%v\nwant Collect's\n%v", got.Rows, exp)
				}
				if !reflect.DeepEqual(got.Columns, want.Columns) {
					t.Errorf("got columns %v, want %v", got.Columns, want.Columns)
				}
				if got.RowCount != tt.rows || got.RowCount != res.RowCount || got.Truncated != tt.trunc || got.SQL != s.SQL ||
					(got.NextCursor != "") != tt.trunc || got.NextCursor != res.NextCursor {
					t.Errorf("got summary %+v, want %d rows, truncated %v, sql %q, cursor %q", got, tt.rows, tt.trunc, s.SQL, res.NextCursor)
				}
			})
		}
	}
}

// objectKeys returns the top-level keys of the JSON object b in order.
func objectKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("got %v %v, want an object", tok, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("got invalid JSON: %v", err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("got invalid JSON: %v", err)
		}
	}
	return keys
}

// jsonRoundTrip is v as a JSON reader gets it (numbers as json.Number).
func jsonRoundTrip(t *testing.T, v any) []any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out := []any{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}
