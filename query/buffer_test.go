package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lakegate/lakegate"
)

// TestBufferCut: a text, JSON or number cell longer than the cell bound
// is kept as text cut at the bound, never inside a UTF-8 sequence, and
// ending in the marker with its original length.
func TestBufferCut(t *testing.T) {
	tests := []struct {
		name     string
		cell     Cell
		bound    int
		wantKeep string // the kept prefix; "" with wantCut false means the cell as it was
		wantCut  bool
	}{
		{"ascii", Cell{Kind: CellText, B: []byte("abcdefghij")}, 4, "abcd", true},
		{"exactly the bound", Cell{Kind: CellText, B: []byte("abcd")}, 4, "", false},
		{"under the bound", Cell{Kind: CellText, B: []byte("ab")}, 4, "", false},
		{"2-byte rune at the bound", Cell{Kind: CellText, B: []byte("abcé!")}, 4, "abc", true},
		{"3-byte rune across the bound", Cell{Kind: CellText, B: []byte("ab✓✓")}, 4, "ab", true},
		{"4-byte rune across the bound", Cell{Kind: CellText, B: []byte("a😀b")}, 4, "a", true},
		{"rune ending at the bound", Cell{Kind: CellText, B: []byte("a✓bc")}, 4, "a✓", true},
		{"json is cut as text", Cell{Kind: CellJSON, B: []byte(`{"k":"vvvvvv"}`)}, 5, `{"k":`, true},
		{"number is cut as text", Cell{Kind: CellNumber, B: []byte("12345678901234567890.5")}, 6, "123456", true},
		{"int is never cut", Cell{Kind: CellInt, I: math.MaxInt64}, 1, "", false},
		{"null is never cut", Cell{Kind: CellNull}, 1, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBuffer(1<<20, 0, tt.bound)
			_ = b.Begin([]ResultColumn{{Name: "c"}})
			if err := b.Row([]Cell{tt.cell}); err != nil {
				t.Fatal(err)
			}
			var got Cell
			_ = b.Each(func(cells []Cell) error { got = cells[0]; got.B = bytes.Clone(got.B); return nil })
			if !tt.wantCut {
				if b.Cut() != 0 || !reflect.DeepEqual(got, tt.cell) {
					t.Errorf("got %+v (cut %d), want %+v kept whole", got, b.Cut(), tt.cell)
				}
				return
			}
			want := tt.wantKeep + CutMarker(len(tt.cell.B))
			if got.Kind != CellText || string(got.B) != want || b.Cut() != 1 {
				t.Errorf("got %v %q (cut %d), want text %q (cut 1)", got.Kind, got.B, b.Cut(), want)
			}
		})
	}
	t.Run("every bound", func(t *testing.T) {
		long := []byte(strings.Repeat("aé✓😀", 20))
		for bound := 1; bound < len(long); bound++ {
			b := NewBuffer(1<<20, 0, bound)
			_ = b.Begin([]ResultColumn{{Name: "c"}})
			_ = b.Row([]Cell{{Kind: CellText, B: long}})
			vals := b.Values()
			s, _ := vals[0][0].(string)
			kept, ok := strings.CutSuffix(s, CutMarker(len(long)))
			if !ok || !utf8.ValidString(kept) || !bytes.HasPrefix(long, []byte(kept)) || len(kept) > bound || len(kept) <= bound-utf8.UTFMax {
				t.Errorf("bound %d: got %q, want a valid prefix of %d to %d bytes and the marker", bound, s, bound-utf8.UTFMax+1, bound)
			}
		}
	})
	if got, want := CutMarker(1234), "…[cut: 1234 bytes in all]"; got != want {
		t.Errorf("got marker %q, want %q", got, want)
	}
}

// TestBufferBounds: a row that would pass maxBytes, or come past maxRows,
// is refused with ErrBufferFull and nothing of it is kept.
func TestBufferBounds(t *testing.T) {
	row := func(s string) []Cell { return []Cell{{Kind: CellInt, I: 1}, {Kind: CellText, B: []byte(s)}} }
	t.Run("bytes", func(t *testing.T) {
		b := NewBuffer(100, 0, 0)
		_ = b.Begin([]ResultColumn{{Name: "i"}, {Name: "t"}})
		kept := 0
		for i := 0; ; i++ {
			before, n := b.Size(), b.Len()
			err := b.Row(row(strings.Repeat("x", 20)))
			if err != nil {
				if !errors.Is(err, ErrBufferFull) {
					t.Fatalf("got %v, want ErrBufferFull", err)
				}
				if b.Size() != before || b.Len() != n {
					t.Errorf("got size %d, %d rows after a refused row, want %d, %d: nothing kept", b.Size(), b.Len(), before, n)
				}
				break
			}
			kept++
			if b.Size() > 100 {
				t.Fatalf("got size %d, want at most 100", b.Size())
			}
		}
		if kept == 0 || b.Len() != kept || len(b.Values()) != kept {
			t.Errorf("got %d rows kept (Len %d, values %d), want some, all readable", kept, b.Len(), len(b.Values()))
		}
		if b.Add(row(strings.Repeat("x", 200))) {
			t.Error("Add of a row larger than the buffer: got true, want false")
		}
	})
	t.Run("rows", func(t *testing.T) {
		b := NewBuffer(1<<20, 3, 0)
		_ = b.Begin([]ResultColumn{{Name: "i"}, {Name: "t"}})
		for i := range 3 {
			if err := b.Row(row("a")); err != nil {
				t.Fatalf("row %d: %v", i, err)
			}
		}
		if err := b.Row(row("a")); !errors.Is(err, ErrBufferFull) {
			t.Errorf("row 4: got %v, want ErrBufferFull", err)
		}
		if b.Len() != 3 {
			t.Errorf("got %d rows, want 3", b.Len())
		}
	})
	t.Run("collect", func(t *testing.T) {
		e, _ := sqliteEngine(t, nil)
		s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, SQLRequest{Database: "lite", SQL: "SELECT * FROM readings", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		_, rows, err := Collect(t.Context(), s, 1000)
		qe := wantKind(t, err, lakegate.KindValidation)
		if !errors.Is(err, ErrBufferFull) || rows != nil || !strings.Contains(qe.Message, "1000 bytes") {
			t.Errorf("got %v (%d rows), want the bound named and ErrBufferFull wrapped", err, len(rows))
		}
	})
}

// TestBufferReplay: rows kept and replayed into an encoder give exactly
// what encoding them directly gives, even when the caller reuses its cell
// bytes after each Row (the buffer copies them).
func TestBufferReplay(t *testing.T) {
	cols := []ResultColumn{{Name: "i"}, {Name: "big"}, {Name: "f"}, {Name: "nan"}, {Name: "b"}, {Name: "t,x"},
		{Name: "e"}, {Name: "n"}, {Name: "num"}, {Name: "j"}, {Name: "f4"}, {Name: "no"}}
	rows := make([][]Cell, 0, 50)
	for i := range 50 {
		r := append(testCells(), Cell{Kind: CellFloat, F: float64(float32(0.1)), Bits: 32}, Cell{Kind: CellBool})
		r[0].I = int64(i)
		r[5].B = []byte(strings.Repeat("é\"", i))
		rows = append(rows, r)
	}
	for _, f := range []Format{FormatCSV, FormatJSON, FormatNDJSON} {
		t.Run(string(f), func(t *testing.T) {
			var direct bytes.Buffer
			enc, _ := NewEncoder(f, &direct)
			_ = enc.Begin(cols)
			for _, r := range rows {
				_ = enc.Row(r)
			}
			_ = enc.End(&Result{})

			b := NewBuffer(1<<20, 0, 0)
			_ = b.Begin(cols)
			scratch := make([]byte, 0, 1024)
			for _, r := range rows {
				// The row's bytes live in scratch, overwritten after Row.
				cp := make([]Cell, len(r))
				copy(cp, r)
				for i := range cp {
					if cp[i].B != nil {
						start := len(scratch)
						scratch = append(scratch, cp[i].B...)
						cp[i].B = scratch[start:len(scratch):len(scratch)]
					}
				}
				if err := b.Row(cp); err != nil {
					t.Fatal(err)
				}
				for i := range scratch {
					scratch[i] = '#'
				}
				scratch = scratch[:0]
			}
			var replayed bytes.Buffer
			enc2, _ := NewEncoder(f, &replayed)
			_ = enc2.Begin(b.Columns())
			if err := b.Replay(enc2); err != nil {
				t.Fatal(err)
			}
			_ = enc2.End(&Result{})
			if replayed.String() != direct.String() {
				t.Errorf("got replayed\n%.300s\nwant\n%.300s", replayed.String(), direct.String())
			}
			if b.Len() != len(rows) {
				t.Errorf("got %d rows, want %d", b.Len(), len(rows))
			}
		})
	}
}

// TestBufferValues: the Go values of the cells, as their JSON reads.
func TestBufferValues(t *testing.T) {
	cells := []Cell{
		{Kind: CellNull},
		{Kind: CellBool, I: 1},
		{Kind: CellBool},
		{Kind: CellInt, I: -42},
		{Kind: CellInt, I: 1<<53 + 1},
		{Kind: CellInt, I: -(1<<53 + 1)},
		{Kind: CellFloat, F: 1.5, Bits: 64},
		{Kind: CellFloat, F: float64(float32(0.1)), Bits: 32},
		{Kind: CellFloat, F: math.NaN(), Bits: 64},
		{Kind: CellFloat, F: math.Inf(1), Bits: 64},
		{Kind: CellFloat, F: math.Inf(-1), Bits: 32},
		{Kind: CellText, B: []byte("héllo")},
		{Kind: CellText, B: []byte{}},
		{Kind: CellNumber, B: []byte("12.50")},
		{Kind: CellJSON, B: []byte(`{"k":[1,2]}`)},
		{Kind: CellJSON, B: []byte(`[1,"x",null]`)},
	}
	want := []any{nil, true, false, int64(-42), "9007199254740993", "-9007199254740993", 1.5, 0.1, "NaN", "Infinity", "-Infinity",
		"héllo", "", json.Number("12.50"), json.RawMessage(`{"k":[1,2]}`), json.RawMessage(`[1,"x",null]`)}
	b := NewBuffer(1<<20, 0, 0)
	_ = b.Begin(make([]ResultColumn, len(cells)))
	if err := b.Row(cells); err != nil {
		t.Fatal(err)
	}
	got := b.Values()
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	// The values encode as the streamed JSON does.
	var nd bytes.Buffer
	enc, _ := NewEncoder(FormatNDJSON, &nd)
	_ = enc.Begin(nil)
	_ = b.Replay(enc)
	_ = enc.End(&Result{})
	if direct, _ := json.Marshal(got[0]); strings.TrimSpace(nd.String()) != string(direct) {
		t.Errorf("got stream %s, want the values' JSON %s", nd.String(), direct)
	}
}
