package query

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

// A statement accepted for one caller is not accepted for another whose
// access differs because of it: the table list is part of the key.
func TestCheckedKeyedByAccess(t *testing.T) {
	e := accessEngine(t)
	r := SQLRequest{Database: "lite", SQL: "SELECT id FROM devices"}
	for range 2 {
		if _, err := e.PrepareSQL(t.Context(), lakegate.Caller{Roles: []string{"reader"}}, r); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.PrepareSQL(t.Context(), lakegate.Caller{Roles: []string{"reader", "analyst"}}, r)
	wantKind(t, err, lakegate.KindForbidden)
	// A refusal is checked again each time, and explained again.
	bad := SQLRequest{Database: "lite", SQL: "SELECT * FROM readngs; DELETE FROM readings"}
	for range 2 {
		if _, err := e.PrepareSQL(t.Context(), lakegate.Caller{Roles: []string{"reader"}}, bad); err == nil {
			t.Fatal("a refused statement was accepted the second time")
		}
	}
}

func TestCheckedBound(t *testing.T) {
	var c checkedCache
	for i := range 3 * maxChecked {
		c.add(fmt.Sprint("k", i))
	}
	if n := len(c.cur) + len(c.prev); n > maxChecked {
		t.Errorf("%d keys held, want at most %d", n, maxChecked)
	}
	if !c.seen(fmt.Sprint("k", 3*maxChecked-1)) || c.seen("k0") {
		t.Error("want the latest key kept and the first gone")
	}
	long := strings.Repeat("x", maxCheckedLen+1)
	c.add(long)
	if c.seen(long) {
		t.Error("a key over the length bound was kept")
	}
}
