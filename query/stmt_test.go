package query

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
)

func TestRunSQLLimits(t *testing.T) {
	le, _ := sqliteEngine(t, &Options{DefaultLimit: 5, MaxLimit: 100})
	engines := map[string]*Engine{"lite": le}
	if os.Getenv(pgEnv) != "" {
		engines["pg"] = pgEngine(t, &Options{DefaultLimit: 5, MaxLimit: 100})
	}
	tests := []struct {
		name          string
		sql           string
		params        []any
		limit         int
		wantRows      int
		wantTruncated bool
	}{
		{"default limit", "SELECT id FROM readings ORDER BY id", nil, 0, 5, true},
		{"explicit limit", "SELECT id FROM readings ORDER BY id", nil, 20, 20, true},
		{"exactly the limit", "SELECT id FROM readings WHERE id <= 3", nil, 3, 3, false},
		{"under the limit", "SELECT id FROM readings WHERE id <= 3", nil, 10, 3, false},
		{"trailing semicolon and comment", "SELECT id FROM readings WHERE id <= 2 -- two\n;\n", nil, 10, 2, false},
		{"trailing line comment", "SELECT id FROM readings WHERE id <= 2 -- no newline", nil, 10, 2, false},
		{"own limit", "SELECT id FROM readings LIMIT 2", nil, 10, 2, false},
		{"no limit is the maximum", "SELECT id FROM readings ORDER BY id", nil, NoLimit, 100, true},
		{"no limit, fewer rows", "SELECT id FROM readings WHERE id <= 30", nil, NoLimit, 30, false},
	}
	for db, e := range engines {
		for _, tt := range tests {
			t.Run(db+" "+tt.name, func(t *testing.T) {
				res, rows := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: db, SQL: tt.sql, Params: tt.params, Limit: tt.limit})
				if res.RowCount != tt.wantRows || len(rows) != tt.wantRows || res.Truncated != tt.wantTruncated {
					t.Errorf("got %d rows (count %d) truncated %v, want %d %v", len(rows), res.RowCount, res.Truncated, tt.wantRows, tt.wantTruncated)
				}
				if res.SQL != tt.sql {
					t.Errorf("got SQL %q, want the caller's %q", res.SQL, tt.sql)
				}
				if res.ElapsedMS < 0 {
					t.Errorf("got elapsed %d, want >= 0", res.ElapsedMS)
				}
			})
		}
		for _, tt := range []struct {
			name  string
			limit int
			want  string
		}{
			{"over max", 101, "maximum of 100"},
			{"negative", -2, "must not be negative"},
			{"very negative", -1 << 40, "must not be negative"},
		} {
			t.Run(db+" "+tt.name, func(t *testing.T) {
				_, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT 1", Limit: tt.limit})
				qe := wantKind(t, err, lakegate.KindValidation)
				if !strings.Contains(qe.Message, tt.want) {
					t.Errorf("got %q, want it to contain %q", qe.Message, tt.want)
				}
			})
		}
	}
}

func TestRunSQLParams(t *testing.T) {
	le, _ := sqliteEngine(t, nil)
	res, rows := collectSQL(t, le, lakegate.Caller{}, SQLRequest{Database: "lite",
		SQL: "SELECT id, status FROM readings WHERE id = ? OR id = ? ORDER BY id", Params: []any{2.0, json.Number("4")}})
	want := [][]any{{int64(2), "ok"}, {int64(4), "warn"}}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("got %v, want %v", rows, want)
	}
	wantCols := []ResultColumn{{Name: "id", Type: "integer", JSON: JSONNumberOrString}, {Name: "status", Type: "text"}}
	if !reflect.DeepEqual(res.Columns, wantCols) {
		t.Errorf("got columns %v, want %v", res.Columns, wantCols)
	}
	pe := maybePG(t)
	if pe == nil {
		return
	}
	_, rows = collectSQL(t, pe, lakegate.Caller{}, SQLRequest{Database: "pg",
		SQL:    "SELECT id, status, $3::text AS echo FROM readings WHERE id = $1 OR id = $2 ORDER BY id",
		Params: []any{2.0, json.Number("4"), "x'; DROP TABLE readings; --"}})
	want = [][]any{{int64(2), "ok", "x'; DROP TABLE readings; --"}, {int64(4), "warn", "x'; DROP TABLE readings; --"}}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("got %v, want %v", rows, want)
	}
	for _, tt := range []struct {
		name   string
		params []any
	}{
		{"missing parameter", nil},
		{"wrong type", []any{"abc"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runSQL(t.Context(), pe, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT id FROM readings WHERE id = $1", Params: tt.params})
			wantKind(t, err, lakegate.KindValidation)
		})
	}
	_, err := pe.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT $1::jsonb", Params: []any{map[string]any{"a": 1.0}}})
	wantKind(t, err, lakegate.KindValidation)
}

func TestRunSQLErrors(t *testing.T) {
	le, _ := sqliteEngine(t, nil)
	engines := map[string]*Engine{"lite": le}
	if pe := maybePG(t); pe != nil {
		engines["pg"] = pe
	}
	tests := []struct {
		name    string
		sql     string
		want    lakegate.Kind
		wantMsg string
	}{
		{"empty", " ; ", lakegate.KindValidation, "empty"},
		{"refused by the validator", "SELEC 1", lakegate.KindValidation, "refused: a statement must start with SELECT"},
		{"syntax", "SELECT 1 FROM", lakegate.KindValidation, "syntax error"},
		{"unknown column", "SELECT nope FROM readings", lakegate.KindValidation, "nope"},
		{"unknown table", "SELECT * FROM nope", lakegate.KindValidation, "nope"},
	}
	for db, e := range engines {
		for _, tt := range tests {
			t.Run(db+" "+tt.name, func(t *testing.T) {
				_, _, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: db, SQL: tt.sql})
				qe := wantKind(t, err, tt.want)
				if !strings.Contains(qe.Message, tt.wantMsg) {
					t.Errorf("got %q, want it to contain %q", qe.Message, tt.wantMsg)
				}
				if strings.Contains(qe.Error(), "postgres:postgres") {
					t.Errorf("got %q, want no credentials", qe.Error())
				}
			})
		}
	}
	_, err := le.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "nope", SQL: "SELECT 1"})
	wantKind(t, err, lakegate.KindNotFound)
}

// TestReadOnly: statements that write must fail and leave the data as it
// was. Through PrepareSQL the validator stops them; run straight at the
// source (as if the validator had let them through), the read-only
// transaction or connection and the one-statement protocol must.
func TestReadOnly(t *testing.T) {
	le, _ := sqliteEngine(t, nil)
	engines := map[string]*Engine{"lite": le}
	if pe := maybePG(t); pe != nil {
		engines["pg"] = pe
	}
	stmts := []string{
		"WITH x AS (INSERT INTO devices (id, name, site, installed, active) VALUES (999, 'x', 'x', '2020-01-01', true) RETURNING id) SELECT * FROM x",
		"SELECT 1; DROP TABLE devices",
		"SELECT 1; DROP TABLE devices; --",
		"SELECT 1) AS a; DROP TABLE devices; SELECT * FROM (SELECT 1",
		"DELETE FROM devices",
		"DROP TABLE devices",
		"SELECT 1; COMMIT; DROP TABLE devices",
		"SET TRANSACTION READ WRITE",
		"UPDATE devices SET name = 'x' RETURNING id",
	}
	for db, e := range engines {
		count := func(t *testing.T) any {
			_, rows, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT count(*) AS n, min(name) AS m FROM devices"})
			if err != nil {
				t.Fatalf("devices must still be there: %v", err)
			}
			return rows[0]
		}
		before := count(t)
		for _, s := range stmts {
			t.Run(db+" "+s, func(t *testing.T) {
				_, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: s})
				wantKind(t, err, lakegate.KindValidation)
				for _, direct := range []string{wrapLimit(s, 11, 0), s} {
					_, err := directStmt(t, e, db, direct, 10).Run(t.Context(), NewBuffer(collectBytes, 0, 0))
					if err == nil {
						t.Fatalf("direct %q: got success, want an error", direct)
					}
					if k := lakegate.KindOf(err); k != lakegate.KindValidation && k != lakegate.KindForbidden {
						t.Errorf("direct %q: got %v, want validation_error or forbidden", direct, err)
					}
				}
				if got := count(t); !reflect.DeepEqual(got, before) {
					t.Errorf("got %v, want %v", got, before)
				}
			})
		}
	}
}

func TestReadOnlyMessage(t *testing.T) {
	pe := maybePG(t)
	if pe == nil {
		t.Skip("PostgreSQL tests skipped: " + pgEnv + " not set")
	}
	_, err := directStmt(t, pe, "pg", "WITH x AS (DELETE FROM devices RETURNING id) SELECT * FROM x", 10).Run(t.Context(), NewBuffer(collectBytes, 0, 0))
	qe := wantKind(t, err, lakegate.KindValidation)
	if !strings.Contains(qe.Message, "read-only transaction") {
		t.Errorf("got %q, want PostgreSQL's read-only error", qe.Message)
	}
}

func TestRunSQLTimeout(t *testing.T) {
	tests := []struct {
		db, sql string
	}{
		{"pg", "SELECT count(*) FROM generate_series(1, 100000000)"},
		{"lite", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) FROM c"},
	}
	for _, tt := range tests {
		t.Run(tt.db, func(t *testing.T) {
			var e *Engine
			opts := &Options{StatementTimeout: 200 * time.Millisecond}
			if tt.db == "pg" {
				e = pgEngine(t, opts)
			} else {
				e, _ = sqliteEngine(t, opts)
			}
			start := time.Now()
			_, _, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: tt.db, SQL: tt.sql})
			wantKind(t, err, lakegate.KindTimeout)
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("got %v, want the query stopped near 200ms", d)
			}
			// The connection is usable afterwards.
			if _, _, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: tt.db, SQL: "SELECT 1"}); err != nil {
				t.Errorf("after timeout: got %v, want success", err)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	tests := []struct {
		db, sql string
	}{
		{"pg", "SELECT count(*) FROM generate_series(1, 1000000000)"},
		{"lite", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) FROM c"},
	}
	for _, tt := range tests {
		t.Run(tt.db, func(t *testing.T) {
			var e *Engine
			if tt.db == "pg" {
				e = pgEngine(t, nil)
			} else {
				e, _ = sqliteEngine(t, nil)
			}
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(200*time.Millisecond, cancel)
			start := time.Now()
			_, _, err := runSQL(ctx, e, lakegate.Caller{}, SQLRequest{Database: tt.db, SQL: tt.sql})
			if err == nil {
				t.Fatal("got success, want the query stopped")
			}
			qe := wantKind(t, err, lakegate.KindUnavailable)
			if !strings.Contains(qe.Message, "cancelled") {
				t.Errorf("got %q, want cancelled", qe.Message)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("got %v, want the query stopped near 200ms", d)
			}
		})
	}
}

func TestWrapLimit(t *testing.T) {
	got := wrapLimit("SELECT 1 -- c", 11, 0)
	want := "SELECT * FROM (\nSELECT 1 -- c\n) AS lakegate_q LIMIT 11"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for in, want := range map[string]string{" SELECT 1 ;; \n": "SELECT 1", "SELECT 1": "SELECT 1", ";": ""} {
		if got := trimSQL(in); got != want {
			t.Errorf("trimSQL(%q): got %q, want %q", in, got, want)
		}
	}
}

// A statement's own timeout (a tool's own) replaces the engine default.
func TestStmtTimeout(t *testing.T) {
	tests := []struct {
		db, sql string
	}{
		{"pg", "SELECT count(*) FROM generate_series(1, 100000000)"},
		{"lite", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) FROM c"},
	}
	for _, tt := range tests {
		t.Run(tt.db, func(t *testing.T) {
			var e *Engine
			opts := &Options{StatementTimeout: time.Minute}
			if tt.db == "pg" {
				e = pgEngine(t, opts)
			} else {
				e, _ = sqliteEngine(t, opts)
			}
			s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: tt.db, SQL: tt.sql})
			if err != nil {
				t.Fatal(err)
			}
			if s.timeout != time.Minute {
				t.Errorf("got timeout %v, want the engine's %v", s.timeout, time.Minute)
			}
			if d := s.WithTimeout(0).timeout; d != time.Minute {
				t.Errorf("WithTimeout(0): got %v, want the engine's %v", d, time.Minute)
			}
			s = s.WithTimeout(200 * time.Millisecond)
			start := time.Now()
			_, _, err = Collect(t.Context(), s, collectBytes)
			wantKind(t, err, lakegate.KindTimeout)
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("got %v, want the query stopped near 200ms", d)
			}
		})
	}
}

// TestMaxRowBytes: a row past Options.MaxRowBytes is refused with a
// validation error naming max_row_bytes and suggesting substring; a row
// under it passes, and the engine (for PostgreSQL, the pool whose
// connection met the big row) keeps working.
func TestMaxRowBytes(t *testing.T) {
	tests := []struct {
		db, big, fits string
	}{
		{"pg", "SELECT repeat('x', 2000000) AS big", "SELECT repeat('x', 500000) AS fits"},
		{"lite", "SELECT substr(hex(zeroblob(1000000)), 1, 2000000) AS big", "SELECT substr(hex(zeroblob(250000)), 1, 500000) AS fits"},
	}
	for _, tt := range tests {
		t.Run(tt.db, func(t *testing.T) {
			var e *Engine
			opts := &Options{MaxRowBytes: 1 << 20}
			if tt.db == "pg" {
				e = pgEngine(t, opts)
			} else {
				e, _ = sqliteEngine(t, opts)
			}
			for i := range 3 {
				_, _, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: tt.db, SQL: tt.big})
				qe := wantKind(t, err, lakegate.KindValidation)
				if !strings.Contains(qe.Message, "max_row_bytes") || !strings.Contains(qe.Hint, "substring") {
					t.Errorf("attempt %d: got %q (hint %q), want max_row_bytes named and substring suggested", i, qe.Message, qe.Hint)
				}
				_, rows, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: tt.db, SQL: tt.fits})
				if err != nil {
					t.Fatalf("attempt %d: a row under the bound after one over it: got %v, want it", i, err)
				}
				if s, _ := rows[0][0].(string); len(s) != 500000 {
					t.Errorf("got a value of %d bytes, want 500000", len(s))
				}
			}
			// Every connection of the pool still answers.
			errs := make(chan error, 8)
			for range cap(errs) {
				go func() {
					_, _, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: tt.db, SQL: "SELECT count(*) FROM readings"})
					errs <- err
				}()
			}
			for range cap(errs) {
				if err := <-errs; err != nil {
					t.Errorf("after the big rows: got %v, want the engine usable", err)
				}
			}
		})
	}
}

// cancelAfterFirst cancels its context once the first row has come.
type cancelAfterFirst struct {
	cancel context.CancelFunc
	rows   int
}

func (s *cancelAfterFirst) Begin([]ResultColumn) error { return nil }
func (s *cancelAfterFirst) Row([]Cell) error {
	s.rows++
	s.cancel()
	return nil
}
func (s *cancelAfterFirst) End(*Result) error { return nil }

// TestCancelBetweenRowsSQLite: a cancel stops an SQLite statement while
// it computes its next row (the driver watches the context only until the
// first row; lakegate interrupts the rest). Here the second row would take
// a billion steps.
func TestCancelBetweenRowsSQLite(t *testing.T) {
	e, _ := sqliteEngine(t, &Options{StatementTimeout: 10 * time.Minute})
	st, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "lite", Limit: NoLimit,
		SQL: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT x FROM c WHERE x = 1 OR x = 1000000000"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	sink := &cancelAfterFirst{cancel: cancel}
	done := make(chan error, 1)
	go func() {
		_, err := st.Run(ctx, sink)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || sink.rows != 1 {
			t.Errorf("got %v after %d rows, want the statement stopped after its first", err, sink.rows)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cancelled statement still runs after a minute")
	}
}
