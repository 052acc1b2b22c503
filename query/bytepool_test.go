package query

import (
	"reflect"
	"testing"

	"github.com/lakegate/lakegate"
)

// TestBytePool: a slice comes back empty with the room it grew to; one
// grown past the pool's bound is let go.
func TestBytePool(t *testing.T) {
	p := bytePool{max: 1 << 10}
	big := make([]byte, 10, 4<<10)
	p.put(&big)
	if got := p.get(); cap(*got) != 0 {
		t.Errorf("a slice past the bound was kept: got one of cap %d", cap(*got))
	}
	// sync.Pool may drop what it is given (always under the race
	// detector, now and then): ask until one comes back.
	for range 100 {
		b := make([]byte, 10, 512)
		b[0] = 'x'
		p.put(&b)
		if got := p.get(); cap(*got) == 512 {
			if len(*got) != 0 {
				t.Errorf("a kept slice came back with %d bytes in it, want none", len(*got))
			}
			return
		}
	}
	t.Error("a slice within the bound never came back")
}

// TestBufferStoreBound: a pooled Buffer takes no store larger than it
// would grow its own to: what it holds stays within twice its bound.
func TestBufferStoreBound(t *testing.T) {
	for range 10 {
		st := make([]byte, 0, 64<<10)
		heldStores.put(&st)
	}
	b := NewBuffer(100, 0, 0).pooled()
	if cap(b.data) > 200 {
		t.Errorf("a Buffer bound to 100 bytes took a store of %d", cap(b.data))
	}
	b.Release()
}

// TestAutoSpillReusedStores: results that spill one after another reuse
// the stores of the rows held before each spilled (and the encoders'
// buffers), yet each keeps its own rows: its preview and its spill are
// still its own once the later ones have run.
func TestAutoSpillReusedStores(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	type run struct {
		want [][]any
		ar   *AutoResult
		sp   *testSpill
	}
	var runs []run
	for i := range 12 {
		order := "id"
		if i%2 == 1 {
			order = "id DESC"
		}
		r := SQLRequest{Database: "lite", SQL: "SELECT id, status, note FROM readings ORDER BY " + order, Limit: 200 + i}
		_, want := collectSQL(t, e, lakegate.Caller{}, r)
		s, err := e.PrepareSQL(t.Context(), lakegate.Caller{}, r)
		if err != nil {
			t.Fatal(err)
		}
		var calls int
		sp := newTestSpill()
		ar, err := s.Auto(t.Context(), AutoOptions{InlineBytes: 512, PreviewRows: 20, PreviewBytes: 1 << 20, Open: opener(sp, &calls)})
		if err != nil || ar.Mode != ModeSpill {
			t.Fatalf("run %d: %v, mode %v; want a spill", i, err, ar)
		}
		runs = append(runs, run{want, ar, sp})
	}
	for i, r := range runs {
		if got := r.ar.Rows.Values(); !reflect.DeepEqual(got, r.want[:20]) {
			t.Errorf("run %d: its preview changed once later runs had gone: got %v", i, got[:2])
		}
		if got := r.sp.decoded(t); !reflect.DeepEqual(got, jsonRoundTrip(t, r.want)) {
			t.Errorf("run %d: its spill holds %d rows, not its own %d", i, len(got), len(r.want))
		}
	}
}
