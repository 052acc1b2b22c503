package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testutil"
)

// After a collection GOGC gives the goal live + headroom; stopped, it is
// as it was, and collections change it no more.
func TestHeadroom(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := Start(256 << 20)
	runtime.GC()
	testutil.Eventually(t, 5*time.Second, "GOGC to follow the headroom", func() bool {
		want := uint64(Percent(liveBase(), 256<<20))
		return want > 1000 && GOGC() == want
	})
	stop()
	if got := GOGC(); got != 100 {
		t.Fatalf("GOGC %d after stop, want 100", got)
	}
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if got := GOGC(); got != 100 {
		t.Errorf("GOGC %d after collections past stop, want 100", got)
	}
	if stop := Start(0); GOGC() != 100 {
		t.Error("no headroom changed GOGC")
	} else {
		stop()
	}
}

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{4 << 20, 32 << 20, 800},
		{32 << 20, 32 << 20, 100},
		{200 << 20, 32 << 20, 100},
		{0, 32 << 20, maxPercent},
		{1, 32 << 20, maxPercent},
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.headroom, got, c.want)
		}
	}
}
