package query

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

func testCells() []Cell {
	return []Cell{
		{Kind: CellInt, I: 42},
		{Kind: CellInt, I: 1<<53 + 1},
		{Kind: CellFloat, F: 1.5, Bits: 64},
		{Kind: CellFloat, F: math.NaN(), Bits: 64},
		{Kind: CellBool, I: 1},
		{Kind: CellText, B: []byte("a,\"b\"\n")},
		{Kind: CellText, B: []byte{}},
		{Kind: CellNull},
		{Kind: CellNumber, B: []byte("12.50")},
		{Kind: CellJSON, B: []byte(`{"k":[1]}`)},
	}
}

func TestEncoders(t *testing.T) {
	cols := []ResultColumn{{Name: "i"}, {Name: "big"}, {Name: "f"}, {Name: "nan"}, {Name: "b"}, {Name: "t,x"},
		{Name: "e"}, {Name: "n"}, {Name: "num"}, {Name: "j"}}
	row := `[42,"9007199254740993",1.5,"NaN",true,"a,\"b\"\n","",null,12.50,{"k":[1]}]`
	tests := []struct {
		format Format
		rows   int
		want   string
	}{
		{FormatJSON, 0, "[]\n"},
		{FormatJSON, 2, "[\n" + row + ",\n" + row + "\n]\n"},
		{FormatNDJSON, 0, ""},
		{FormatNDJSON, 2, row + "\n" + row + "\n"},
		{FormatCSV, 0, "i,big,f,nan,b,\"t,x\",e,n,num,j\n"},
		{FormatCSV, 1, "i,big,f,nan,b,\"t,x\",e,n,num,j\n" +
			"42,9007199254740993,1.5,NaN,true,\"a,\"\"b\"\"\n\",\"\",,12.50,\"{\"\"k\"\":[1]}\"\n"},
	}
	for _, tt := range tests {
		t.Run(string(tt.format)+" "+string(rune('0'+tt.rows)), func(t *testing.T) {
			var buf bytes.Buffer
			enc, err := NewEncoder(tt.format, &buf)
			if err != nil {
				t.Fatal(err)
			}
			if err := enc.Begin(cols); err != nil {
				t.Fatal(err)
			}
			for range tt.rows {
				if err := enc.Row(testCells()); err != nil {
					t.Fatal(err)
				}
			}
			if err := enc.End(&Result{}); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if got := enc.Written(); got != int64(buf.Len()) {
				t.Errorf("got Written %d, want %d", got, buf.Len())
			}
			if tt.format != FormatCSV && tt.rows > 0 {
				dec := json.NewDecoder(strings.NewReader(buf.String()))
				for dec.More() {
					var v any
					if err := dec.Decode(&v); err != nil {
						t.Fatalf("got invalid JSON %v, want valid", err)
					}
				}
			}
		})
	}
	if _, err := NewEncoder("xml", &bytes.Buffer{}); lakegate.KindOf(err) != lakegate.KindValidation {
		t.Errorf("got %v, want a validation error for an unknown format", err)
	}
}

// errGone is the error of failWriter.
var errGone = errors.New("gone")

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errGone }

func TestEncoderWriteError(t *testing.T) {
	enc, _ := NewEncoder(FormatCSV, failWriter{})
	_ = enc.Begin([]ResultColumn{{Name: "x"}})
	var err error
	for i := 0; i < 100000 && err == nil; i++ {
		err = enc.Row([]Cell{{Kind: CellText, B: []byte("some text to fill the buffer")}})
	}
	if err == nil {
		t.Fatal("got no error, want the writer's")
	}
	if err2 := enc.End(&Result{}); err2 == nil {
		t.Errorf("got End nil after a failed write, want the error again")
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\ nl\n tab\t cr\r", "\x00\x01\x1f", "héllo ✓ 😀",
		"\u2028\u2029", "<&>", string([]byte{0xff, 'a', 0xc3})} {
		t.Run(s, func(t *testing.T) {
			got := appendJSONString(nil, []byte(s))
			var back string
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("got %q (%v), want valid JSON", got, err)
			}
			want, _ := json.Marshal(s)
			var wantBack string
			_ = json.Unmarshal(want, &wantBack)
			if back != wantBack {
				t.Errorf("got %q, want %q", back, wantBack)
			}
		})
	}
}

func TestAppendFloat(t *testing.T) {
	for _, f := range []float64{0, 1.5, -2.25, 1e-7, 123456789, 1e21, 1e20, 3.0000000000000004, math.SmallestNonzeroFloat64, math.MaxFloat64} {
		want, _ := json.Marshal(f)
		if got := appendFloat(nil, f, 64); string(got) != string(want) {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
	if got := appendFloat(nil, float64(float32(0.1)), 32); string(got) != "0.1" {
		t.Errorf("float32 0.1: got %s, want 0.1", got)
	}
}

// numericBytes builds PostgreSQL's binary numeric.
func numericBytes(weight int16, sign uint16, dscale int16, digits ...uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(digits)))
	b = binary.BigEndian.AppendUint16(b, uint16(weight))
	b = binary.BigEndian.AppendUint16(b, sign)
	b = binary.BigEndian.AppendUint16(b, uint16(dscale))
	for _, d := range digits {
		b = binary.BigEndian.AppendUint16(b, d)
	}
	return b
}

func TestAppendNumeric(t *testing.T) {
	tests := []struct {
		name  string
		raw   []byte
		want  string
		exact bool
	}{
		{"zero", numericBytes(0, 0, 0), "0", true},
		{"zero scale 2", numericBytes(0, 0, 2), "0.00", true},
		{"12.50", numericBytes(0, 0, 2, 12, 5000), "12.50", true},
		{"negative", numericBytes(0, 0x4000, 2, 1), "-1.00", true},
		{"0.1", numericBytes(-1, 0, 1, 1000), "0.1", true},
		{"0.00001", numericBytes(-2, 0, 5, 1000), "0.00001", true},
		{"10000", numericBytes(1, 0, 0, 1), "10000", true},
		{"big", numericBytes(4, 0, 9, 1234, 5678, 9012, 3456, 7890, 1234, 5678, 9000),
			"12345678901234567890.123456789", false},
		{"NaN", numericBytes(0, 0xC000, 0), "NaN", false},
		{"Infinity", numericBytes(0, 0xD000, 0), "Infinity", false},
		{"-Infinity", numericBytes(0, 0xF000, 0), "-Infinity", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := appendNumeric(nil, tt.raw)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			if ex := decimalExact(got); ex != tt.exact {
				t.Errorf("exact: got %v, want %v", ex, tt.exact)
			}
		})
	}
	if _, err := appendNumeric(nil, []byte{0, 1}); err == nil {
		t.Error("short input: got no error, want one")
	}
}

// TestDecimalExactMatchesDecimalValue: the streaming rule and the batch
// rule agree.
func TestDecimalExactMatchesDecimalValue(t *testing.T) {
	for _, s := range []string{"12.50", "0.1", "-0.000", "123456789012345", "1234567890123456",
		"0.1234567890123456", "1" + strings.Repeat("0", 400), "100.001", "-99999999999999.9", "0"} {
		_, isNum := decimalValue(s).(json.Number)
		if got := decimalExact([]byte(s)); got != isNum {
			t.Errorf("%s: got %v, want %v", s, got, isNum)
		}
	}
}

// longCell is n bytes of text that needs escaping in JSON and quoting in
// CSV all along: quotes, backslashes, line breaks, commas, a control
// byte, 2-, 3- and 4-byte UTF-8, U+2028 and an invalid byte. The pattern
// (37 bytes) does not divide the encoders' chunk size, so chunk
// boundaries fall at every offset of it.
func longCell(n int) []byte {
	const pattern = "a\"b\\c\nd,\r\x01é✓😀\u2028x\xffyz 0123456789"
	b := make([]byte, 0, n+len(pattern))
	for len(b) < n {
		b = append(b, pattern...)
	}
	return b[:n]
}

// writeRecorder records each write an encoder makes, and whether it came
// through WritePart (a piece of a row that goes on in the next write).
type writeRecorder struct {
	buf   bytes.Buffer
	sizes []int
	parts []bool
}

var _ PartWriter = (*writeRecorder)(nil)

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.sizes, w.parts = append(w.sizes, len(p)), append(w.parts, false)
	return w.buf.Write(p)
}

func (w *writeRecorder) WritePart(p []byte) (int, error) {
	w.sizes, w.parts = append(w.sizes, len(p)), append(w.parts, true)
	return w.buf.Write(p)
}

// TestEncoderLongCell: a row with a 1 MiB cell goes out in pieces of about
// 64 KiB, through WritePart except the write that ends the row, and the
// pieces add up to exactly the unchunked encoding of the whole value.
func TestEncoderLongCell(t *testing.T) {
	big := longCell(1 << 20)
	cols := []ResultColumn{{Name: "id"}, {Name: "t"}}
	rows := [][]Cell{
		{{Kind: CellInt, I: 1}, {Kind: CellText, B: []byte("small")}},
		{{Kind: CellInt, I: 2}, {Kind: CellText, B: big}},
		{{Kind: CellInt, I: 3}, {Kind: CellText, B: []byte("after")}},
	}
	jsonRow := func(r []Cell) string {
		return "[" + string(appendJSONCell(nil, &r[0])) + "," + string(appendJSONString(nil, r[1].B)) + "]"
	}
	csvRow := func(r []Cell) string {
		return string(appendCSVCell(nil, &r[0])) + "," + string(appendCSVField(nil, r[1].B, true)) + "\n"
	}
	tests := []struct {
		format Format
		// want is the whole output; ends are the offsets where rows end.
		want func() (string, []int)
	}{
		{FormatNDJSON, func() (string, []int) {
			var out string
			var ends []int
			for _, r := range rows {
				out += jsonRow(r) + "\n"
				ends = append(ends, len(out))
			}
			return out, ends
		}},
		{FormatJSON, func() (string, []int) {
			out := "["
			var ends []int
			for i, r := range rows {
				if i > 0 {
					out += ","
				}
				out += "\n" + jsonRow(r)
				ends = append(ends, len(out))
			}
			return out + "\n]\n", ends
		}},
		{FormatCSV, func() (string, []int) {
			out := "id,t\n"
			var ends []int
			for _, r := range rows {
				out += csvRow(r)
				ends = append(ends, len(out))
			}
			return out, ends
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.format), func(t *testing.T) {
			w := &writeRecorder{}
			enc, err := NewEncoder(tt.format, w)
			if err != nil {
				t.Fatal(err)
			}
			if err := enc.Begin(cols); err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if err := enc.Row(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := enc.End(&Result{}); err != nil {
				t.Fatal(err)
			}
			want, ends := tt.want()
			if got := w.buf.String(); got != want {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Fatalf("got %d bytes, want %d, first difference at byte %d: got %q, want %q",
					len(got), len(want), i, got[i:min(len(got), i+40)], want[i:min(len(want), i+40)])
			}
			if got := enc.Written(); got != int64(len(want)) {
				t.Errorf("got Written %d, want %d", got, len(want))
			}
			// About 64 KiB a write: the part threshold plus at most one
			// escaped chunk (this text at most doubles when escaped).
			const maxWrite = 2*encFlushAt + 2*encChunk
			parts, off := 0, 0
			for i, n := range w.sizes {
				off += n
				if n > maxWrite {
					t.Errorf("write %d: got %d bytes, want at most %d", i, n, maxWrite)
				}
				if w.parts[i] {
					parts++
					continue
				}
				// A Write ends a row (or the output).
				if !slices.Contains(ends, off) && off != len(want) {
					t.Errorf("write %d: got a Write ending at byte %d, inside a row (rows end at %v)", i, off, ends)
				}
			}
			if last := len(w.parts) - 1; last < 0 || w.parts[last] {
				t.Errorf("got the last write a WritePart, want a Write")
			}
			if min := len(big) / (2 * encFlushAt); parts < min {
				t.Errorf("got %d WritePart calls, want at least %d for a 1 MiB cell", parts, min)
			}
			if tt.format == FormatNDJSON {
				// And it is the JSON of the value.
				line, _, _ := strings.Cut(want[len(jsonRow(rows[0]))+1:], "\n")
				var back []any
				if err := json.Unmarshal([]byte(line), &back); err != nil {
					t.Fatalf("got invalid JSON: %v", err)
				}
				exp, _ := json.Marshal(string(big))
				var wantStr string
				_ = json.Unmarshal(exp, &wantStr)
				if back[1] != wantStr {
					t.Errorf("got a cell of %d bytes that differs from encoding/json's %d", len(back[1].(string)), len(wantStr))
				}
			}
		})
	}
}

// TestEncoderLongJSONCell: long JSON documents and decimals go out as
// they are, in parts.
func TestEncoderLongJSONCell(t *testing.T) {
	doc := []byte(`["` + strings.Repeat("é✓", 100000) + `"]`)
	w := &writeRecorder{}
	enc, _ := NewEncoder(FormatNDJSON, w)
	_ = enc.Begin(nil)
	if err := enc.Row([]Cell{{Kind: CellJSON, B: doc}}); err != nil {
		t.Fatal(err)
	}
	if err := enc.End(&Result{}); err != nil {
		t.Fatal(err)
	}
	if got, want := w.buf.String(), "["+string(doc)+"]\n"; got != want {
		t.Errorf("got %d bytes, want %d, the document as it is", len(got), len(want))
	}
	if len(w.sizes) < 2 || !w.parts[0] || w.parts[len(w.parts)-1] {
		t.Errorf("got writes %v (parts %v), want parts then one Write", w.sizes, w.parts)
	}
}
