package query

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

// EncodeRows writes a batch result as the streaming encoders would: every
// cell of a row keeps its own value.
func TestEncodeRows(t *testing.T) {
	res := &Result{
		Columns: []ResultColumn{{Name: "a", Type: "text"}, {Name: "b", Type: "text"}, {Name: "n", Type: "numeric"}, {Name: "j", Type: "jsonb"}},
		Rows: [][]any{
			{"hello", "hi", json.Number("1.50"), json.RawMessage(`{"k":[1,2]}`)},
			{"x1", "yyyyyyyy", nil, json.RawMessage(`"s"`)},
		},
	}
	var nd, csv bytes.Buffer
	if err := EncodeRows(res, FormatNDJSON, &nd); err != nil {
		t.Fatal(err)
	}
	if want := "[\"hello\",\"hi\",1.50,{\"k\":[1,2]}]\n[\"x1\",\"yyyyyyyy\",null,\"s\"]\n"; nd.String() != want {
		t.Errorf("ndjson: got %q, want %q", nd.String(), want)
	}
	if err := EncodeRows(res, FormatCSV, &csv); err != nil {
		t.Fatal(err)
	}
	if want := "a,b,n,j\nhello,hi,1.50,\"{\"\"k\"\":[1,2]}\"\nx1,yyyyyyyy,,\"\"\"s\"\"\"\n"; csv.String() != want {
		t.Errorf("csv: got %q, want %q", csv.String(), want)
	}
	if err := EncodeRows(res, "xml", &csv); KindOf(err) != KindValidation {
		t.Errorf("format xml: got %v, want a validation error", err)
	}
}

// The tap counts rows and keeps the leading ones within its bounds.
func TestTapKeeps(t *testing.T) {
	tap := &Tap{KeepRows: 2, KeepBytes: 1 << 10}
	cells := []Cell{{Kind: CellInt, I: 7}, {Kind: CellText, B: []byte("a")}}
	for range 3 {
		tap.row(cells, 10)
	}
	rows, all := tap.Kept()
	if tap.Rows() != 3 || tap.Bytes() != 10 || len(rows) != 2 || all || rows[1][0] != json.Number("7") || rows[1][1] != "a" {
		t.Errorf("got %d rows counted, %d kept (all %v): %v", tap.Rows(), len(rows), all, rows)
	}
	if WithTap(context.Background(), tap).Value(tapKey{}) != tap {
		t.Error("WithTap does not carry the tap")
	}
	if v := JSONValue(json.RawMessage(`[1]`)); string(v.(json.RawMessage)) != "[1]" {
		t.Errorf("JSONValue of an array: got %v", v)
	}
}
