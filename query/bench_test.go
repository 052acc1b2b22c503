package query

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/query/validate"
)

// benchEnv names the database of the full-path benchmarks: the iot data
// set (integration/testdata/iot.sql) loaded with 1M readings; `make bench`
// (integration/bench.sh) sets it up.
const benchEnv = "LAKEGATE_BENCH_DATABASE_URL"

// demoBenchEngine opens the demo database, in a temporary directory, as
// "lite".
func demoBenchEngine(b *testing.B) *Engine {
	b.Helper()
	path := filepath.Join(b.TempDir(), "demo.db")
	if err := CreateDemo(b.Context(), path); err != nil {
		b.Fatal(err)
	}
	e, err := Open(b.Context(), []config.Database{{Name: "lite", URL: "sqlite:" + path}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

func BenchmarkBuildAndValidate(b *testing.B) {
	e := demoBenchEngine(b)
	r := Request{Database: "lite", Table: "readings",
		Filters: []Filter{{Column: "device_id", Op: "=", Value: 3.0}, {Column: "status", Op: "in", Value: []any{"ok", "warn"}}},
		OrderBy: []Order{{Column: "ts", Desc: true}}, Limit: 50}
	ctx := b.Context()
	if _, err := e.PrepareQuery(ctx, lakegate.Caller{}, r); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.PrepareQuery(ctx, lakegate.Caller{}, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrepareSQL is the preparation of a point query as run_sql
// sends it: grant, validation, row cap.
func BenchmarkPrepareSQL(b *testing.B) {
	e := demoBenchEngine(b)
	r := SQLRequest{Database: "lite", SQL: "SELECT id, device_id, ts, temperature FROM readings WHERE id = $1", Params: []any{4242.0}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.PrepareSQL(b.Context(), lakegate.Caller{}, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	sql := "SELECT device_id, count(*) AS n, avg(temperature) FROM readings WHERE ts >= $1 AND status IN ('ok', 'warn') GROUP BY device_id ORDER BY n DESC LIMIT 20"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := validate.Check(sql, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode measures the encoders alone on a readings-shaped row.
func BenchmarkEncode(b *testing.B) {
	row := []Cell{
		{Kind: CellInt, I: 123456}, {Kind: CellInt, I: 457},
		{Kind: CellText, B: []byte("2025-01-01T10:17:48Z")},
		{Kind: CellFloat, F: 21.37, Bits: 64}, {Kind: CellFloat, F: 54.12, Bits: 64},
		{Kind: CellNumber, B: []byte("737.36")}, {Kind: CellText, B: []byte("ok")}, {Kind: CellNull},
	}
	for _, f := range []Format{FormatCSV, FormatJSON, FormatNDJSON} {
		b.Run(string(f), func(b *testing.B) {
			enc, _ := NewEncoder(f, io.Discard)
			_ = enc.Begin(nil)
			b.ReportAllocs()
			for b.Loop() {
				_ = enc.Row(row)
			}
			_ = enc.End(&Result{})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkEncodeLongCell measures the chunked path: one row holding a
// 1 MiB text cell that needs escaping.
func BenchmarkEncodeLongCell(b *testing.B) {
	row := []Cell{{Kind: CellInt, I: 1}, {Kind: CellText, B: longCell(1 << 20)}}
	for _, f := range []Format{FormatCSV, FormatJSON} {
		b.Run(string(f), func(b *testing.B) {
			enc, _ := NewEncoder(f, io.Discard)
			_ = enc.Begin(nil)
			b.SetBytes(int64(len(row[1].B)))
			b.ReportAllocs()
			for b.Loop() {
				_ = enc.Row(row)
			}
			_ = enc.End(&Result{})
		})
	}
}

// BenchmarkDecodeArray measures the container decoder on the array of
// issue 21 (numerics of 10^30 times 1..n) as the wire brings it, and on an
// int8 array, each of 100,000 elements: bytes are wire bytes.
func BenchmarkDecodeArray(b *testing.B) {
	m := pgtype.NewMap()
	nums := make([]pgtype.Numeric, 100000)
	ints := make([]int64, len(nums))
	for i := range nums {
		_ = nums[i].Scan(strconv.Itoa(i+1) + strings.Repeat("0", 30))
		ints[i] = int64(i) << 20
	}
	for _, tt := range []struct {
		name string
		oid  uint32
		v    any
	}{{"numeric", pgtype.NumericArrayOID, nums}, {"int8", pgtype.Int8ArrayOID, ints}} {
		b.Run(tt.name, func(b *testing.B) {
			raw := wireOf(b, m, tt.oid, tt.v)
			row := &pgRow{cols: []pgColumn{{oid: tt.oid, format: pgx.BinaryFormatCode, m: m, decode: decContainer}}, max: DefaultMaxRowBytes}
			cells := make([]Cell, 1)
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if err := row.decode([][]byte{raw}, cells); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(cells[0].B))/float64(len(raw)), "out/wire")
		})
	}
}

// BenchmarkRunSQLite is the full path on the demo database, no server
// needed: SQLite to encoded bytes through Stmt.Run, per format.
func BenchmarkRunSQLite(b *testing.B) {
	path := filepath.Join(b.TempDir(), "demo.db")
	if err := CreateDemo(b.Context(), path); err != nil {
		b.Fatal(err)
	}
	e, err := Open(b.Context(), []config.Database{{Name: "lite", URL: "sqlite:" + path}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close(context.Background()) }()
	benchRun(b, e, "lite")
}

// benchRun runs SELECT * FROM readings on db into each encoder, reporting
// rows/s and MB/s.
func benchRun(b *testing.B, e *Engine, db string) {
	s, err := e.PrepareSQL(b.Context(), lakegate.Caller{}, SQLRequest{Database: db, SQL: "SELECT * FROM readings", Limit: NoLimit})
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []Format{FormatCSV, FormatJSON, FormatNDJSON} {
		b.Run(string(f), func(b *testing.B) {
			var rows, bytes int64
			b.ReportAllocs()
			for b.Loop() {
				w := &countWriter{}
				enc, _ := NewEncoder(f, w)
				res, err := s.Run(b.Context(), enc)
				if err != nil {
					b.Fatal(err)
				}
				if res.Truncated || res.RowCount == 0 {
					b.Fatalf("got %d rows, truncated %v, want every row", res.RowCount, res.Truncated)
				}
				rows += int64(res.RowCount)
				bytes += w.n
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(rows)/s, "rows/s")
			b.ReportMetric(float64(bytes)/s/1e6, "MB/s")
		})
	}
}

// benchEngine opens the benchmark database, or skips: as the
// least-privileged roles make bench gives it (integration/testdata/roles.sql).
func benchEngine(tb testing.TB) *Engine { return benchEngineWith(tb, nil) }

// countWriter counts bytes and drops them.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// BenchmarkStreamReadings is the full path, database to encoded bytes:
// SELECT * FROM readings through Stmt.Run into an encoder, per format.
func BenchmarkStreamReadings(b *testing.B) {
	benchRun(b, benchEngine(b), "iot")
}

// BenchmarkProfileReadings is BenchmarkStreamReadings' NDJSON (the
// blocks' format) with and without the profile of every row: what the
// profile adds to the full path on real rows.
func BenchmarkProfileReadings(b *testing.B) {
	e := benchEngine(b)
	s, err := e.PrepareSQL(b.Context(), lakegate.Caller{}, SQLRequest{Database: "iot", SQL: "SELECT * FROM readings", Limit: NoLimit})
	if err != nil {
		b.Fatal(err)
	}
	for _, profiled := range []bool{false, true} {
		b.Run(fmt.Sprintf("profiled=%v", profiled), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				enc, _ := NewEncoder(FormatNDJSON, &countWriter{})
				var sink Sink = enc
				if profiled {
					sink = &profiledSink{Encoder: enc}
				}
				if _, err := s.Run(b.Context(), sink); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// profiledSink profiles the rows it encodes, as a result in blocks does.
type profiledSink struct {
	Encoder
	p *Profile
}

func (s *profiledSink) Begin(cols []ResultColumn) error {
	s.p = NewProfile(cols)
	return s.Encoder.Begin(cols)
}

func (s *profiledSink) Row(cells []Cell) error {
	s.p.Add(cells)
	return s.Encoder.Row(cells)
}

// TestStreamRSS streams every reading as CSV and checks the peak resident
// memory of this process (VmHWM). Run alone in its own process (make
// bench does) so that nothing else counts.
func TestStreamRSS(t *testing.T) {
	if os.Getenv("LAKEGATE_BENCH_RSS") == "" {
		t.Skip("set LAKEGATE_BENCH_RSS=1 and " + benchEnv + " (make bench does)")
	}
	e := benchEngine(t)
	s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "iot", SQL: "SELECT * FROM readings", Limit: NoLimit})
	if err != nil {
		t.Fatal(err)
	}
	w := &countWriter{}
	enc, _ := NewEncoder(FormatJSON, w)
	res, err := s.Run(t.Context(), enc)
	if err != nil {
		t.Fatal(err)
	}
	hwm := vmHWM(t)
	t.Logf("streamed %d rows, %d bytes; peak RSS %.1f MiB", res.RowCount, w.n, float64(hwm)/(1<<20))
	if hwm >= 64<<20 {
		t.Errorf("got peak RSS %d bytes, want under 64 MiB", hwm)
	}
}

// vmHWM reads the peak resident set size of this process.
func vmHWM(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmHWM")
	return 0
}

// BenchmarkProfile measures what a result's profile adds to its encoding
// (NDJSON, the blocks' format) on readings-shaped rows: encode alone,
// then profile and encode.
func BenchmarkProfile(b *testing.B) {
	status := []string{"ok", "ok", "ok", "ok", "warn", "fail"}
	rows := make([][]Cell, 1000)
	for i := range rows {
		rows[i] = []Cell{
			{Kind: CellInt, I: int64(i)}, {Kind: CellInt, I: int64(1 + i%1000)},
			{Kind: CellText, B: []byte(fmt.Sprintf("2025-01-01T10:%02d:%02dZ", i/60%60, i%60))},
			{Kind: CellFloat, F: 15 + float64(i%2000)/100, Bits: 64}, {Kind: CellFloat, F: 54.12, Bits: 64},
			{Kind: CellNumber, B: []byte(fmt.Sprintf("%d.%02d", i%1000, i%100))}, {Kind: CellText, B: []byte(status[i%6])}, {Kind: CellNull},
		}
	}
	cols := make([]ResultColumn, 8)
	for _, profiled := range []bool{false, true} {
		b.Run(fmt.Sprintf("profiled=%v", profiled), func(b *testing.B) {
			enc, _ := NewEncoder(FormatNDJSON, io.Discard)
			_ = enc.Begin(cols)
			p := NewProfile(cols)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if profiled {
					p.Add(rows[i%len(rows)])
				}
				_ = enc.Row(rows[i%len(rows)])
				i++
			}
			_ = enc.End(&Result{})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkPageDepth is the cost of a page of readings ordered by (ts, id)
// at the start and 1,000 pages of 100 rows in: by keyset (the cursor a
// walk of the pages would have reached) and by offset (what paging cost
// before), on the iot data set (make bench gives it an index on (ts, id),
// as a table read in time order would have).
func BenchmarkPageDepth(b *testing.B) {
	e := benchEngine(b)
	r := Request{Database: "iot", Table: "readings", Columns: cols("device_id", "ts", "temperature"), OrderBy: []Order{{Column: "ts"}}, Limit: 100}
	_, hash, err := e.requestStart(r)
	if err != nil {
		b.Fatal(err)
	}
	// The keys of the last row of page 999.
	s, err := e.PrepareSQL(b.Context(), lakegate.Caller{}, SQLRequest{Database: "iot", SQL: "SELECT ts, id FROM readings ORDER BY ts, id OFFSET 99899 LIMIT 1"})
	if err != nil {
		b.Fatal(err)
	}
	_, rows, err := Collect(b.Context(), s, 1<<20)
	if err != nil || len(rows) != 1 {
		b.Fatal(rows, err)
	}
	deep := r
	deep.Cursor = e.encodeCursor(pageStart{after: rows[0]}, hash)
	offset := r
	offset.Offset = 99900
	for _, tc := range []struct {
		name string
		r    Request
	}{{"page1", r}, {"page1000-keyset", deep}, {"page1000-offset", offset}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				res, _, err := runQuery(b.Context(), e, lakegate.Caller{}, tc.r)
				if err != nil || res.RowCount != 100 {
					b.Fatal(res, err)
				}
			}
		})
	}
}
