package query

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestProfile(t *testing.T) {
	cols := []ResultColumn{{Name: "id"}, {Name: "status"}, {Name: "power"}, {Name: "ts"}, {Name: "note"}, {Name: "level"}}
	p := NewProfile(cols)
	statuses := []string{"ok", "ok", "warn", "fail", "ok"}
	for i := range 100 {
		row := []Cell{
			{Kind: CellInt, I: int64(100 - i)},
			{Kind: CellText, B: []byte(statuses[i%len(statuses)])},
			{Kind: CellNumber, B: []byte(fmt.Sprintf("%d.5", i%7-3))},
			{Kind: CellText, B: []byte(fmt.Sprintf("2025-01-%02dT00:00:00Z", 1+i%28))},
			{Kind: CellNull},
			{Kind: CellFloat, F: float64(i%4) / 2, Bits: 64},
		}
		if i%10 == 0 {
			row[2] = Cell{Kind: CellNull}
			row[4] = Cell{Kind: CellText, B: []byte(fmt.Sprintf("maintenance %d", i))}
		}
		p.Add(row)
	}
	got := p.Columns()
	want := []ColumnProfile{
		{Name: "id", Count: 100, Min: "1", Max: "100"},
		{Name: "status", Count: 100, Min: "fail", Max: "warn", Distinct: 3,
			Top: []ValueCount{{"ok", 60}, {"fail", 20}, {"warn", 20}}},
		{Name: "power", Count: 90, Nulls: 10, Min: "-3.5", Max: "3.5", Distinct: 7},
		{Name: "ts", Count: 100, Min: "2025-01-01T00:00:00Z", Max: "2025-01-28T00:00:00Z"},
		{Name: "note", Count: 10, Nulls: 90, Min: "maintenance 0", Max: "maintenance 90", Distinct: 10},
		{Name: "level", Count: 100, Min: "0", Max: "1.5", Distinct: 4,
			Top: []ValueCount{{"0", 25}, {"0.5", 25}, {"1", 25}, {"1.5", 25}}},
	}
	for i := range want {
		g := got[i]
		if want[i].Top == nil {
			g.Top = nil // checked by count below
		}
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("column %s: got %+v, want %+v", want[i].Name, got[i], want[i])
		}
	}
	// id has 100 distinct values: past the bound, no counts; power's 7
	// values are counted.
	if got[0].Distinct != 0 || got[0].Top != nil || len(got[2].Top) != 7 {
		t.Errorf("got id %+v, power top %v", got[0], got[2].Top)
	}
}

// TestProfileDecimalBounds: the least and greatest of exact decimals, in
// every form PostgreSQL writes them (scales mixed, signs, leading zeros,
// more digits than an int64 holds), agree with exact arithmetic.
func TestProfileDecimalBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + rng.IntN(10))
		}
		return string(b)
	}
	for round := range 200 {
		p := NewProfile([]ResultColumn{{Name: "n"}})
		var lo, hi *big.Rat
		oneScale := round%2 == 0 // as numeric(p,s) writes them
		for range 1 + rng.IntN(50) {
			v := digits(1 + rng.IntN(22))
			if oneScale {
				v = digits(1+rng.IntN(8)) + "." + digits(2)
			} else if rng.IntN(2) == 0 {
				v += "." + digits(1+rng.IntN(20))
			}
			if rng.IntN(3) == 0 {
				v = "-" + v
			}
			p.Add([]Cell{{Kind: CellNumber, B: []byte(v)}})
			r, _ := new(big.Rat).SetString(v)
			if lo == nil || r.Cmp(lo) < 0 {
				lo = r
			}
			if hi == nil || r.Cmp(hi) > 0 {
				hi = r
			}
		}
		got := p.Columns()[0]
		gotLo, _ := new(big.Rat).SetString(got.Min)
		gotHi, _ := new(big.Rat).SetString(got.Max)
		if gotLo == nil || gotHi == nil || gotLo.Cmp(lo) != 0 || gotHi.Cmp(hi) != 0 {
			t.Fatalf("round %d: got %s..%s, want %s..%s", round, got.Min, got.Max, lo.FloatString(20), hi.FloatString(20))
		}
	}
}
