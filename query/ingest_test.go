package query

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

func TestInsertSQLite(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	rows := []map[string]any{
		{"id": 1.0, "n": json.Number("12.50"), "f": 1.5, "t": "a", "b": true, "d": "2024-02-29",
			"ts": "2024-01-02T04:04:05.5+01:00", "bl": "AP8Q", "j": map[string]any{"k": []any{1.0}}, "dev": 3.0},
		{"id": json.Number("2"), "t": "b", "b": "false"},
		{"ID": 3.0}, // case-insensitive column name; t keeps its default
	}
	n, err := e.Insert(t.Context(), lakegate.Caller{}, "lite", "sink", rows)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("got %d rows inserted, want 3", n)
	}
	_, got := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "lite", SQL: "SELECT * FROM sink ORDER BY id"})
	want := [][]any{
		{int64(1), 12.5, 1.5, "a", true, "2024-02-29", "2024-01-02T03:04:05.5Z", "AP8Q", json.RawMessage(`{"k":[1]}`), int64(3)},
		{int64(2), nil, nil, "b", false, nil, nil, nil, nil, nil},
		{int64(3), nil, nil, "x", nil, nil, nil, nil, nil, nil}, // t's default
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
}

func TestInsertErrors(t *testing.T) {
	le, _ := sqliteEngine(t, nil)
	engines := map[string]*Engine{"lite": le}
	if pe := maybePG(t); pe != nil {
		engines["pg"] = pe
	}
	tests := []struct {
		name    string
		table   string
		rows    []map[string]any
		want    lakegate.Kind
		wantMsg string
	}{
		{"unknown table", "sinc", []map[string]any{{"id": 1.0}}, lakegate.KindNotFound, `unknown table "sinc"`},
		{"view", "ok_readings", []map[string]any{{"id": 1.0}}, lakegate.KindValidation, "not a table"},
		{"unknown column", "sink", []map[string]any{{"id": 1.0}, {"id": 2.0}, {"id": 3.0}, {"id": 4.0, "nope": 1.0}}, lakegate.KindValidation, `row 3: unknown column "nope"`},
		{"bad integer", "sink", []map[string]any{{"id": 1.0}, {"id": "abc"}}, lakegate.KindValidation, `row 1, column "id": expected an integer`},
		{"fraction", "sink", []map[string]any{{"id": 1.5}}, lakegate.KindValidation, `row 0, column "id": expected an integer`},
		{"bad date", "sink", []map[string]any{{"id": 1.0, "d": "soon"}}, lakegate.KindValidation, `row 0, column "d": expected a date`},
		{"bad timestamp", "sink", []map[string]any{{"id": 1.0, "ts": 5.0}}, lakegate.KindValidation, `column "ts": expected an RFC 3339 timestamp`},
		{"twice", "sink", []map[string]any{{"id": 1.0, "ID": 2.0}}, lakegate.KindValidation, `row 0: column "id" is given twice`},
		{"empty row", "sink", []map[string]any{{}}, lakegate.KindValidation, "row 0 has no columns"},
		{"not null", "sink", []map[string]any{{"id": 1.0}, {"id": 2.0, "t": nil}}, lakegate.KindValidation, "null"},
		{"duplicate key", "sink", []map[string]any{{"id": 10.0}, {"id": 10.0}}, lakegate.KindValidation, ""},
	}
	for db, e := range engines {
		for _, tt := range tests {
			t.Run(db+" "+tt.name, func(t *testing.T) {
				n, err := e.Insert(t.Context(), lakegate.Caller{}, db, tt.table, tt.rows)
				qe := wantKind(t, err, tt.want)
				if !strings.Contains(strings.ToLower(qe.Message), strings.ToLower(tt.wantMsg)) {
					t.Errorf("got %q, want it to contain %q", qe.Message, tt.wantMsg)
				}
				if n != 0 {
					t.Errorf("got %d inserted, want 0", n)
				}
				_, rows := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT count(*) FROM sink"})
				if got := rows[0][0]; got != int64(0) {
					t.Errorf("got %v rows in sink, want 0: nothing may be inserted", got)
				}
			})
		}
	}
	if _, err := le.Insert(t.Context(), lakegate.Caller{}, "lite", "sink", []map[string]any{{"id": 1.0, "nope": 1.0}}); err != nil {
		qe := wantKind(t, err, lakegate.KindValidation)
		if !strings.Contains(qe.Hint, "known columns: id, n, f, t") {
			t.Errorf("got hint %q, want the table's columns", qe.Hint)
		}
	}
	if n, err := le.Insert(t.Context(), lakegate.Caller{}, "lite", "sink", nil); err != nil || n != 0 {
		t.Errorf("no rows: got %d %v, want 0 nil", n, err)
	}
	if _, err := le.Insert(t.Context(), lakegate.Caller{}, "nope", "sink", nil); lakegate.KindOf(err) != lakegate.KindNotFound {
		t.Errorf("unknown db: got %v, want not_found", err)
	}
}

func TestInsertPG(t *testing.T) {
	e := pgEngine(t, nil)
	rows := []map[string]any{
		{"id": json.Number("9007199254740993"), "small": 7.0, "n": "12.345", "f": 1.5, "t": "a", "b": true,
			"d": "2024-02-29", "ts": "2024-01-02T04:04:05.123456+01:00", "by": "AP8Q",
			"u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "jb": map[string]any{"k": []any{1.0, "x"}},
			"ia": []any{1.0, 2.0}, "iv": "1 day 02:00:00"},
		{"id": 2.0, "t": "b"},
	}
	t.Cleanup(func() {
		// Leave sink empty for the error tests, whatever order tests run in.
		pg := e.sources["pg"].(*pgSource)
		// Not t.Context(): it is cancelled before cleanups run.
		_, _ = pg.pool.Exec(context.Background(), "DELETE FROM sink WHERE id = ANY($1)", []int64{9007199254740993, 2})
	})
	n, err := e.Insert(t.Context(), lakegate.Caller{}, "pg", "sink", rows)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("got %d, want 2", n)
	}
	_, got := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT * FROM sink ORDER BY id"})
	b, _ := json.Marshal(got)
	want := `[[2,null,null,null,"b",null,null,null,null,null,null,null,null,"dflt"],` +
		`["9007199254740993",7,12.345,1.5,"a",true,"2024-02-29","2024-01-02T03:04:05.123456Z","AP8Q","a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",{"k":[1,"x"]},[1,2],"1 day 02:00:00","dflt"]]`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
