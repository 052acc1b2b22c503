package query

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
)

// streamRows runs sql into an NDJSON encoder and decodes every row.
func streamRows(t *testing.T, e *Engine, db, sql string, limit int) ([]any, *Result, Encoder) {
	t.Helper()
	s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: sql, Limit: limit})
	if err != nil {
		t.Fatalf("PrepareSQL: %v", err)
	}
	var buf bytes.Buffer
	enc, err := NewEncoder(FormatNDJSON, &buf)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(t.Context(), enc)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if enc.Written() != int64(buf.Len()) {
		t.Errorf("got Written %d, want the %d bytes written", enc.Written(), buf.Len())
	}
	var rows []any
	dec := json.NewDecoder(&buf)
	dec.UseNumber()
	for dec.More() {
		var r any
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("got invalid NDJSON: %v", err)
		}
		rows = append(rows, r)
	}
	return rows, res, enc
}

// collectRows collects sql and returns the rows as JSON reads them.
func collectRows(t *testing.T, e *Engine, db, sql string) ([]any, *Result) {
	t.Helper()
	res, rows := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: db, SQL: sql, Limit: 1000})
	return jsonRoundTrip(t, rows), res
}

// TestCollectMatchesStream: the Go values of Collect (Buffer.Values) and
// the streamed JSON follow the same type rules, for every type of the
// fixtures: a value reads the same whichever way it came.
func TestCollectMatchesStream(t *testing.T) {
	le, _ := sqliteEngine(t, nil)
	engines := map[string]*Engine{"lite": le}
	queries := map[string][]string{
		"lite": {"SELECT * FROM kinds ORDER BY id", "SELECT * FROM readings ORDER BY id", "SELECT 1.5 AS r, x'01' AS b, NULL AS n, 'a' AS t"},
		"pg": {"SELECT * FROM types ORDER BY id", "SELECT * FROM readings ORDER BY id",
			"SELECT 'ok'::mood AS m, 1::oid AS o, 'x'::name AS nm, 'y'::varchar AS v, 'z'::char(3) AS c, '12:34:56.789'::time AS tm, " +
				"'infinity'::timestamptz AS inf, '-infinity'::date AS ninf, '192.168.0.1/24'::inet AS ip, int4range(1, 5) AS rg, " +
				"ARRAY[1.5, NULL]::numeric[] AS na, ARRAY['2024-01-01T00:00:00Z'::timestamptz] AS ta, '(1,2)'::point AS pt, " +
				"1e300::float8 AS huge, 1e-300::float8 AS tiny, 123456789.125::float4 AS f4, -0.0::float8 AS nz, " +
				"'0.000001'::numeric AS small, 99999999999999999999::numeric AS wide, 'q\"b\\s,' AS esc, '{}'::jsonb AS ej"},
	}
	if pe := maybePG(t); pe != nil {
		engines["pg"] = pe
	}
	for db, e := range engines {
		for _, q := range queries[db] {
			t.Run(db+" "+q[:min(len(q), 40)], func(t *testing.T) {
				want, cres := collectRows(t, e, db, q)
				got, sres, enc := streamRows(t, e, db, q, 1000)
				if len(got) != len(want) {
					t.Fatalf("got %d rows, want %d", len(got), len(want))
				}
				for i := range want {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Errorf("row %d:\ngot  %v\nwant %v", i, got[i], want[i])
					}
				}
				if !reflect.DeepEqual(sres.Columns, cres.Columns) {
					t.Errorf("got columns %v, want %v", sres.Columns, cres.Columns)
				}
				if sres.RowCount != len(want) || cres.RowCount != len(want) || enc.Written() == 0 {
					t.Errorf("got row counts %d and %d, %d bytes, want %d and > 0", sres.RowCount, cres.RowCount, enc.Written(), len(want))
				}
			})
		}
	}
}

// countSink counts rows and fails at row failAt (from 1; 0: never) with
// errSink.
type countSink struct {
	begins, rows, ends int
	failAt             int
}

var errSink = errors.New("sink refused the row")

func (s *countSink) Begin([]ResultColumn) error { s.begins++; return nil }

func (s *countSink) Row([]Cell) error {
	s.rows++
	if s.rows == s.failAt {
		return errSink
	}
	return nil
}

func (s *countSink) End(*Result) error { s.ends++; return nil }

func TestStreamFormatsAndLimits(t *testing.T) {
	le, _ := sqliteEngine(t, &Options{MaxLimit: 500})
	engines := map[string]*Engine{"lite": le}
	if os.Getenv(pgEnv) != "" {
		engines["pg"] = pgEngine(t, &Options{MaxLimit: 500})
	}
	tests := []struct {
		name          string
		limit         int
		wantRows      int
		wantTruncated bool
	}{
		{"no limit is the maximum", NoLimit, 500, true},
		{"default limit", 0, DefaultLimit, true},
		{"limit", 7, 7, true},
		{"under the limit", 499, 499, true},
	}
	const sql = "SELECT id, status, note FROM readings ORDER BY id"
	for db, e := range engines {
		for _, tt := range tests {
			t.Run(db+" "+tt.name, func(t *testing.T) {
				s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: sql, Limit: tt.limit})
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				enc, _ := NewEncoder(FormatCSV, &buf)
				res, err := s.Run(t.Context(), enc)
				if err != nil {
					t.Fatal(err)
				}
				recs, err := csv.NewReader(&buf).ReadAll()
				if err != nil {
					t.Fatalf("got invalid CSV: %v", err)
				}
				if got := len(recs) - 1; got != tt.wantRows || res.RowCount != tt.wantRows || res.Truncated != tt.wantTruncated {
					t.Errorf("got %d records (count %d, truncated %v), want %d %v", got, res.RowCount, res.Truncated, tt.wantRows, tt.wantTruncated)
				}
				if got := strings.Join(recs[0], ","); got != "id,status,note" {
					t.Errorf("got header %q, want id,status,note", got)
				}
				if res.SQL != sql || (res.NextCursor != "") != tt.wantTruncated || (res.Hint != "") != tt.wantTruncated {
					t.Errorf("got SQL %q cursor %q hint %q, want the caller's SQL, and a cursor and hint when truncated", res.SQL, res.NextCursor, res.Hint)
				}
			})
		}
		t.Run(db+" over the maximum", func(t *testing.T) {
			_, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT 1", Limit: 501})
			wantKind(t, err, lakegate.KindValidation)
		})
		t.Run(db+" refused", func(t *testing.T) {
			_, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT 1; DROP TABLE devices"})
			wantKind(t, err, lakegate.KindValidation)
		})
		t.Run(db+" run twice", func(t *testing.T) {
			s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT id FROM readings ORDER BY id", Limit: 3})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				_, rows, err := Collect(t.Context(), s, collectBytes)
				if err != nil || !reflect.DeepEqual(rows, [][]any{{int64(1)}, {int64(2)}, {int64(3)}}) {
					t.Errorf("got %v %v, want ids 1 to 3", rows, err)
				}
			}
		})
		t.Run(db+" writer fails", func(t *testing.T) {
			s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT * FROM readings", Limit: NoLimit})
			if err != nil {
				t.Fatal(err)
			}
			enc, _ := NewEncoder(FormatJSON, failWriter{})
			_, err = s.Run(t.Context(), enc)
			if !errors.Is(err, errGone) {
				t.Errorf("got %v, want the writer's error", err)
			}
			if _, _, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT 1"}); err != nil {
				t.Errorf("after a failed writer: got %v, want the engine usable", err)
			}
		})
		t.Run(db+" sink fails", func(t *testing.T) {
			s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT id FROM readings", Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			sink := &countSink{failAt: 3}
			_, err = s.Run(t.Context(), sink)
			if err != errSink {
				t.Errorf("got %v, want the sink's own error as it was returned", err)
			}
			if sink.begins != 1 || sink.rows != 3 || sink.ends != 0 {
				t.Errorf("got %d Begin, %d Row, %d End, want 1, 3 and no End (no retry after output began)", sink.begins, sink.rows, sink.ends)
			}
		})
		t.Run(db+" a failed statement never touches the sink", func(t *testing.T) {
			sink := &countSink{}
			_, err := directStmt(t, e, db, "SELECT nope FROM readings", 10).Run(t.Context(), sink)
			wantKind(t, err, lakegate.KindValidation)
			if sink.begins+sink.rows+sink.ends != 0 {
				t.Errorf("got %d Begin, %d Row, %d End, want none", sink.begins, sink.rows, sink.ends)
			}
		})
	}
}

// TestCancelStopsPostgres: cancelling the context stops the query in
// PostgreSQL itself (a CancelRequest), seen in pg_stat_activity within
// 5 s, where the query would run for a minute and its statement timeout
// is an hour. The time it took is logged; speed is for make bench.
func TestCancelStopsPostgres(t *testing.T) {
	// A statement timeout far past the test's bound: only the cancel can
	// stop the query within it.
	e := pgEngine(t, &Options{StatementTimeout: time.Hour})
	admin, err := pgx.Connect(t.Context(), os.Getenv(pgEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	const marker = "lakegate_cancel_probe"
	// A backend's first statement loads its catalog caches (tens of ms
	// on a busy machine); warm it so the test measures the cancel.
	if _, _, err := runSQL(t.Context(), e, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT count(*) FROM generate_series(1, 10)"}); err != nil {
		t.Fatal(err)
	}
	const collect, stream = "collect", "stream"
	for i, mode := range []string{collect, stream, collect, stream, collect, stream} {
		t.Run(fmt.Sprintf("%s %d", mode, i/2), func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			sql := "SELECT count(*) AS " + marker + " FROM generate_series(1, 2000000000)"
			done := make(chan error, 1)
			go func() {
				s, err := e.PrepareSQL(ctx, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: sql})
				if err == nil {
					if mode == collect {
						_, _, err = Collect(ctx, s, collectBytes)
					} else {
						enc, _ := NewEncoder(FormatCSV, &bytes.Buffer{})
						_, err = s.Run(ctx, enc)
					}
				}
				done <- err
			}()
			const q = "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()"
			var pid int32
			if !testutil.Within(10*time.Second, func() bool { return admin.QueryRow(t.Context(), q, marker).Scan(&pid) == nil }) {
				cancel()
				<-done
				t.Fatal("the query never showed up as active")
			}
			// The server's own clock times the stop: state_change of the
			// backend minus the server time just before the cancel, so the
			// polling's own latency does not count.
			var cancelledAt time.Time
			if err := admin.QueryRow(t.Context(), "SELECT clock_timestamp()").Scan(&cancelledAt); err != nil {
				t.Fatal(err)
			}
			cancel()
			start := time.Now()
			var stopped time.Duration
			if !testutil.Within(5*time.Second, func() bool {
				var (
					state   string
					changed time.Time
				)
				err := admin.QueryRow(t.Context(), "SELECT state, state_change FROM pg_stat_activity WHERE pid = $1", pid).Scan(&state, &changed)
				if errors.Is(err, pgx.ErrNoRows) {
					stopped = time.Since(start)
					return true
				}
				if err == nil && state != "active" {
					stopped = changed.Sub(cancelledAt)
					return true
				}
				return false
			}) {
				t.Fatal("the backend is still active 5 s after the cancel")
			}
			t.Logf("backend %d stopped %v after the cancel", pid, stopped)
			err := <-done
			qe := wantKind(t, err, lakegate.KindUnavailable)
			if !strings.Contains(qe.Message, "cancelled") {
				t.Errorf("got %q, want cancelled", qe.Message)
			}
		})
	}
}
