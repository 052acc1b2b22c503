package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/lakegate/lakegate"
)

// testSpill is a Spill writing NDJSON to memory (a fake destination), that
// counts its calls and can fail its failAt-th row.
type testSpill struct {
	enc    Encoder
	buf    bytes.Buffer
	failAt int

	begins, rows, ends, aborts int
}

var (
	_        Spill = (*testSpill)(nil)
	errSpill       = errors.New("spill refused the row")
)

func newTestSpill() *testSpill {
	s := &testSpill{}
	s.enc, _ = NewEncoder(FormatNDJSON, &s.buf)
	return s
}

func (s *testSpill) Begin(cols []ResultColumn) error { s.begins++; return s.enc.Begin(cols) }

func (s *testSpill) Row(cells []Cell) error {
	s.rows++
	if s.rows == s.failAt {
		return errSpill
	}
	return s.enc.Row(cells)
}

func (s *testSpill) End(res *Result) error { s.ends++; return s.enc.End(res) }
func (s *testSpill) Abort()                { s.aborts++ }
func (s *testSpill) Written() int64        { return s.enc.Written() }

// decoded returns the rows written, as JSON reads them.
func (s *testSpill) decoded(t *testing.T) []any {
	t.Helper()
	out := []any{}
	dec := json.NewDecoder(bytes.NewReader(s.buf.Bytes()))
	dec.UseNumber()
	for dec.More() {
		var r any
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("got invalid NDJSON from the spill: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// opener returns an AutoOptions.Open that makes one spill and counts its
// calls.
func opener(sp *testSpill, calls *int) func() (Spill, error) {
	return func() (Spill, error) {
		*calls++
		return sp, nil
	}
}

// autoEngines are the SQLite engine and, when configured, PostgreSQL.
func autoEngines(t *testing.T) map[string]*Engine {
	le, _ := sqliteEngine(t, nil)
	engines := map[string]*Engine{"lite": le}
	if pe := maybePG(t); pe != nil {
		engines["pg"] = pe
	}
	return engines
}

func TestAutoInline(t *testing.T) {
	for db, e := range autoEngines(t) {
		t.Run(db, func(t *testing.T) {
			r := SQLRequest{Database: db, SQL: "SELECT id, status, note FROM readings WHERE id <= 3 ORDER BY id"}
			_, want := collectSQL(t, e, lakegate.Caller{}, r)
			s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, r)
			if err != nil {
				t.Fatal(err)
			}
			var (
				calls int
				p     Progress
			)
			sp := newTestSpill()
			ar, err := s.Auto(t.Context(), AutoOptions{InlineBytes: 4096, PreviewRows: 1, PreviewBytes: 4096, Open: opener(sp, &calls), Progress: &p})
			if err != nil {
				t.Fatal(err)
			}
			if ar.Mode != ModeInline || calls != 0 {
				t.Fatalf("got mode %q with Open called %d times, want inline and no Open", ar.Mode, calls)
			}
			if got := ar.Rows.Values(); !reflect.DeepEqual(got, want) {
				t.Errorf("got rows %v, want %v", got, want)
			}
			if ar.RowCount != 3 || ar.Truncated || ar.SQL != r.SQL || len(ar.Columns) != 3 {
				t.Errorf("got %+v, want 3 rows of 3 columns, the caller's SQL", ar.Result)
			}
			if p.Rows() != 3 || p.Bytes() != ar.Rows.Size() {
				t.Errorf("got progress %d rows %d bytes, want 3 and %d", p.Rows(), p.Bytes(), ar.Rows.Size())
			}
		})
	}
}

// TestAutoSpill: a result past InlineBytes goes to the spill, every row
// once and in order, and the preview is its first rows. Held rows are
// replayed into the spill when the size was not known (SQLite, or a
// PostgreSQL estimate too low); with an estimate past the bound the rows
// go there from the first.
func TestAutoSpill(t *testing.T) {
	tests := []struct {
		name string
		sql  map[string]string
		// estimatePast: PostgreSQL estimates the result past InlineBytes.
		estimatePast bool
	}{
		{"held then spilled", map[string]string{
			"lite": "SELECT id, status, note FROM readings ORDER BY id",
			// The planner takes repeat() for 32 bytes: the estimate is
			// far under the bound, the rows are not.
			"pg": "SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 50) g",
		}, false},
		{"spilled from the first row", map[string]string{
			"pg": "SELECT id, status, note FROM readings ORDER BY id",
		}, true},
	}
	const previewRows = 7
	for db, e := range autoEngines(t) {
		for _, tt := range tests {
			sql, ok := tt.sql[db]
			if !ok {
				continue
			}
			t.Run(db+" "+tt.name, func(t *testing.T) {
				r := SQLRequest{Database: db, SQL: sql, Limit: 1000}
				_, want := collectSQL(t, e, lakegate.Caller{}, r)
				s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, r)
				if err != nil {
					t.Fatal(err)
				}
				const inline = 4096
				if est, ok := s.Estimate(t.Context()); db == "pg" && (!ok || (est > inline) != tt.estimatePast) {
					t.Fatalf("got estimate %v (ok %v), want it past %d: %v", est, ok, inline, tt.estimatePast)
				}
				var (
					calls int
					p     Progress
				)
				sp := newTestSpill()
				ar, err := s.Auto(t.Context(), AutoOptions{InlineBytes: inline, PreviewRows: previewRows, PreviewBytes: 1 << 20,
					Open: opener(sp, &calls), Progress: &p})
				if err != nil {
					t.Fatal(err)
				}
				if ar.Mode != ModeSpill || calls != 1 {
					t.Fatalf("got mode %q with Open called %d times, want spill, once", ar.Mode, calls)
				}
				if sp.begins != 1 || sp.ends != 1 || sp.aborts != 0 {
					t.Errorf("got %d Begin, %d End, %d Abort, want 1, 1, 0", sp.begins, sp.ends, sp.aborts)
				}
				if got := sp.decoded(t); !reflect.DeepEqual(got, jsonRoundTrip(t, want)) {
					t.Errorf("got %d rows in the spill, want the %d rows once each, in order", len(got), len(want))
				}
				if got := ar.Rows.Values(); !reflect.DeepEqual(got, want[:previewRows]) {
					t.Errorf("got preview %v, want the first %d rows %v", got, previewRows, want[:previewRows])
				}
				// Progress counts the bytes the spill has handed on, which
				// lag what its encoder holds (up to a flush) until End.
				if ar.RowCount != len(want) || p.Rows() != int64(len(want)) || p.Bytes() > sp.Written() || p.Bytes() < sp.Written()-2*encFlushAt {
					t.Errorf("got count %d, progress %d rows %d bytes, want %d rows and about %d bytes", ar.RowCount, p.Rows(), p.Bytes(), len(want), sp.Written())
				}
			})
		}
	}
}

// TestAutoAlways: an export spills even a result that fits.
func TestAutoAlways(t *testing.T) {
	for db, e := range autoEngines(t) {
		t.Run(db, func(t *testing.T) {
			r := SQLRequest{Database: db, SQL: "SELECT id FROM readings WHERE id <= 3 ORDER BY id"}
			s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, r)
			if err != nil {
				t.Fatal(err)
			}
			var calls int
			sp := newTestSpill()
			ar, err := s.Auto(t.Context(), AutoOptions{InlineBytes: 1 << 20, PreviewRows: 10, PreviewBytes: 1 << 20, Always: true, Open: opener(sp, &calls)})
			if err != nil {
				t.Fatal(err)
			}
			if ar.Mode != ModeSpill || calls != 1 || sp.ends != 1 || sp.aborts != 0 {
				t.Fatalf("got mode %q, Open %d, End %d, Abort %d, want spill, 1, 1, 0", ar.Mode, calls, sp.ends, sp.aborts)
			}
			want := [][]any{{int64(1)}, {int64(2)}, {int64(3)}}
			if got := ar.Rows.Values(); !reflect.DeepEqual(got, want) {
				t.Errorf("got preview %v, want %v", got, want)
			}
			if got := sp.decoded(t); !reflect.DeepEqual(got, jsonRoundTrip(t, want)) {
				t.Errorf("got spilled %v, want %v", got, want)
			}
		})
	}
}

// TestAutoAbort: when the run fails after the spill was opened, the spill
// is aborted, never ended.
func TestAutoAbort(t *testing.T) {
	failing := map[string]string{
		// The 500th row fails in the database, after 499 went out.
		"lite": "SELECT CASE WHEN id < 500 THEN id ELSE abs(-9223372036854775807 - 1) END AS x FROM readings ORDER BY id",
		"pg":   "SELECT CASE WHEN g < 500 THEN g ELSE 1 / (g - g) END AS x FROM generate_series(1, 1000) g",
	}
	tests := []struct {
		name   string
		sql    string // "" for failing[db]
		always bool
		failAt int
	}{
		{"spill fails, export", "SELECT id, status FROM readings ORDER BY id", true, 5},
		{"spill fails replaying held rows", "SELECT id, status FROM readings ORDER BY id", false, 5},
		{"spill fails after the held rows", "SELECT id, status FROM readings ORDER BY id", false, 400},
		{"database fails mid-result", "", true, 0},
	}
	for db, e := range autoEngines(t) {
		for _, tt := range tests {
			t.Run(db+" "+tt.name, func(t *testing.T) {
				sql := tt.sql
				if sql == "" {
					sql = failing[db]
				}
				s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: sql, Limit: 1000})
				if err != nil {
					t.Fatal(err)
				}
				var calls int
				sp := newTestSpill()
				sp.failAt = tt.failAt
				_, err = s.Auto(t.Context(), AutoOptions{InlineBytes: 2048, PreviewRows: 3, PreviewBytes: 1 << 20, Always: tt.always, Open: opener(sp, &calls)})
				if err == nil {
					t.Fatal("got success, want the run to fail")
				}
				if tt.failAt > 0 && !errors.Is(err, errSpill) {
					t.Errorf("got %v, want the spill's error", err)
				}
				if tt.failAt == 0 {
					wantKind(t, err, lakegate.KindValidation)
					if sp.rows < 100 {
						t.Errorf("got %d rows into the spill before the failure, want the failure mid-result", sp.rows)
					}
				}
				if calls != 1 || sp.aborts != 1 || sp.ends != 0 {
					t.Errorf("got Open %d, Abort %d, End %d, want 1, 1, 0", calls, sp.aborts, sp.ends)
				}
			})
		}
		t.Run(db+" open fails", func(t *testing.T) {
			s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT id FROM readings", Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			errOpen := errors.New("no room")
			_, err = s.Auto(t.Context(), AutoOptions{InlineBytes: 64, Open: func() (Spill, error) { return nil, errOpen }})
			if !errors.Is(err, errOpen) {
				t.Errorf("got %v, want Open's error", err)
			}
		})
	}
}

// TestAutoWrongEstimate: the planner expects a large result and the rows
// go to the spill from the first; the result turns out to fit the preview
// uncut, so it is answered inline after all and the spill is dropped.
func TestAutoWrongEstimate(t *testing.T) {
	e := pgEngine(t, nil)
	tests := []struct {
		name     string
		sql      string
		cellCut  int
		wantMode string
		want     [][]any
	}{
		{"fits the preview", "SELECT * FROM generate_series(1, 1000000) g WHERE g % 1000000 = 7", 0, ModeInline, [][]any{{int64(7)}}},
		{"fits but a cell was cut", "SELECT g, repeat('y', 500) AS pad FROM generate_series(1, 1000000) g WHERE g % 1000000 = 7", 100, ModeSpill, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "pg", SQL: tt.sql, Limit: NoLimit})
			if err != nil {
				t.Fatal(err)
			}
			const inline = 1000
			if est, ok := s.Estimate(t.Context()); !ok || est <= inline {
				t.Fatalf("got estimate %v (ok %v), want one past %d bytes", est, ok, inline)
			}
			var calls int
			sp := newTestSpill()
			ar, err := s.Auto(t.Context(), AutoOptions{InlineBytes: inline, PreviewRows: 10, PreviewBytes: 4096, PreviewCellBytes: tt.cellCut, Open: opener(sp, &calls)})
			if err != nil {
				t.Fatal(err)
			}
			if ar.Mode != tt.wantMode || calls != 1 {
				t.Fatalf("got mode %q, Open called %d times, want %q after opening the spill", ar.Mode, calls, tt.wantMode)
			}
			if tt.wantMode == ModeInline {
				if sp.aborts != 1 || sp.ends != 0 {
					t.Errorf("got Abort %d, End %d, want the spill aborted, never ended", sp.aborts, sp.ends)
				}
				if got := ar.Rows.Values(); !reflect.DeepEqual(got, tt.want) || ar.RowCount != 1 {
					t.Errorf("got rows %v (count %d), want %v", got, ar.RowCount, tt.want)
				}
				return
			}
			if sp.aborts != 0 || sp.ends != 1 || ar.Rows.Cut() != 1 {
				t.Errorf("got Abort %d, End %d, %d cells cut, want the spill ended and the cut cell in the preview", sp.aborts, sp.ends, ar.Rows.Cut())
			}
		})
	}
	// The estimate is cached by statement text.
	s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "pg", SQL: tests[0].sql, Limit: NoLimit})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := e.plans.get("pg", s.text); !ok {
		t.Error("got no cached estimate, want the plan cached")
	}
}

// TestEstimate: PostgreSQL estimates rows × width capped at the row cap;
// SQLite has no estimate.
func TestEstimate(t *testing.T) {
	le, _ := sqliteEngine(t, nil)
	s, err := le.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "lite", SQL: "SELECT * FROM readings"})
	if err != nil {
		t.Fatal(err)
	}
	if est, ok := s.Estimate(t.Context()); ok {
		t.Errorf("sqlite: got estimate %v, want none", est)
	}
	pe := maybePG(t)
	if pe == nil {
		return
	}
	tests := []struct {
		name    string
		limit   int
		min     float64
		max     float64
		refused bool
	}{
		{"capped at the limit", 10, 10, 10 * 200, false},
		{"every row", NoLimit, 1000, 1000 * 200, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := pe.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT * FROM readings", Limit: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			est, ok := s.Estimate(t.Context())
			if !ok || est < tt.min || est > tt.max {
				t.Errorf("got %v (ok %v), want %v to %v bytes", est, ok, tt.min, tt.max)
			}
		})
	}
	s, err = pe.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT nope FROM readings"})
	if err != nil {
		t.Fatal(err)
	}
	if est, ok := s.Estimate(t.Context()); ok {
		t.Errorf("a statement the planner refuses: got estimate %v, want none", est)
	}
}
