package query

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzLongCell: a text cell long enough to be written in chunks and parts
// comes out byte for byte as the whole value encoded at once, in JSON and
// CSV, whatever bytes it holds; and a Buffer keeps it (cut or not) so that
// it replays to the same cell or to a valid cut one.
func FuzzLongCell(f *testing.F) {
	for _, seed := range []string{"x", "a\"b,c\nd", "é€😀", "\xff\xfe", "\u2028\u2029", "\x00\x1f\\", strings.Repeat("ab", 9000)} {
		f.Add(seed, 7)
	}
	f.Fuzz(func(t *testing.T, unit string, cut int) {
		if unit == "" {
			return
		}
		long := []byte(strings.Repeat(unit, 2*encChunk/len(unit)+3))
		cell := Cell{Kind: CellText, B: long}
		for _, tc := range []struct {
			f    Format
			want []byte
		}{
			{FormatNDJSON, append(append([]byte{'['}, appendJSONString(nil, long)...), ']', '\n')},
			{FormatCSV, append(appendCSVField([]byte("c\n"), long, true), '\n')},
		} {
			var out bytes.Buffer
			enc, err := NewEncoder(tc.f, &out)
			if err != nil {
				t.Fatal(err)
			}
			if err := enc.Begin([]ResultColumn{{Name: "c"}}); err != nil {
				t.Fatal(err)
			}
			if err := enc.Row([]Cell{cell}); err != nil {
				t.Fatal(err)
			}
			if err := enc.End(&Result{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), tc.want) {
				t.Fatalf("%s: chunked output differs from the whole value encoded at once", tc.f)
			}
		}

		bound := 1 + abs(cut)%(2*len(long))
		b := NewBuffer(1<<30, 0, bound)
		_ = b.Begin([]ResultColumn{{Name: "c"}})
		if !b.Add([]Cell{cell}) {
			t.Fatal("row refused")
		}
		_ = b.Each(func(cells []Cell) error {
			got := cells[0].B
			switch {
			case len(long) <= bound:
				if !bytes.Equal(got, long) {
					t.Fatalf("a cell within the bound changed")
				}
			default:
				marker := []byte(CutMarker(len(long)))
				kept, ok := bytes.CutSuffix(got, marker)
				if !ok || len(kept) > bound || !bytes.HasPrefix(long, kept) || cells[0].Kind != CellText {
					t.Fatalf("cut at %d: got %d bytes, want a prefix of at most the bound and the marker", bound, len(got))
				}
				if utf8.Valid(long) && !utf8.Valid(kept) {
					t.Fatalf("cut at %d split a UTF-8 sequence", bound)
				}
			}
			return nil
		})
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
