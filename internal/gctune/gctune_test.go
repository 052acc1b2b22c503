package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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
		heap, base := live()
		want := uint64(Percent(heap, base, 256<<20))
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

// The runtime's own heap goal, read after a collection, is the live heap
// plus the headroom: not the 4 MiB floor scaled by the GOGC set, which on
// a small live heap is many times more.
func TestHeapGoal(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const headroom = 32 << 20
	stop := Start(headroom)
	defer stop()
	var heap, goal uint64
	testutil.Eventually(t, 5*time.Second, "GOGC to follow the headroom", func() bool {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the tuner runs after the collection
		var b uint64
		heap, b = live()
		goal = heapGoal()
		return GOGC() == uint64(Percent(heap, b, headroom))
	})
	if want := heap + headroom; goal > want+want/50 || goal < want-want/50 {
		t.Errorf("heap goal %d MiB with %d MiB live, want %d MiB (live + headroom)", goal>>20, heap>>20, want>>20)
	}
}

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// goalAt is the runtime's heap goal at GOGC=p (runtime/mgcpacer.go).
func goalAt(heap, base uint64, p int) uint64 {
	return max(heap+base*uint64(p)/100, heapMinimum*uint64(p)/100)
}

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		heap, base, headroom uint64
		want                 int
	}{
		{1 << 20, 3 << 19, 32 << 20, 825}, // the floor binds: 4 MiB × 8.25 = 33 MiB
		{4 << 20, 4 << 20, 32 << 20, 800},
		{32 << 20, 32 << 20, 32 << 20, 100},
		{200 << 20, 200 << 20, 32 << 20, 100},
		{0, 0, 32 << 20, 800},
		{1, 1, 32 << 20, 800},
		{1 << 20, 1 << 20, 1 << 20, 100},
	} {
		if got := Percent(c.heap, c.base, c.headroom); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.heap, c.base, c.headroom, got, c.want)
		}
	}
	// Over a spread of live heaps, the goal Percent gives is within the
	// live heap plus headroom, and one more percent would pass it.
	for heap := uint64(64 << 10); heap < 256<<20; heap = heap*3/2 + 1 {
		for _, headroom := range []uint64{1 << 20, 4 << 20, 8 << 20, 32 << 20, 512 << 20} {
			base := heap + 300<<10
			p := Percent(heap, base, headroom)
			if p == 100 || p == maxPercent {
				continue
			}
			want := heap + headroom
			if g := goalAt(heap, base, p); g > want {
				t.Errorf("heap %d, headroom %d: GOGC %d gives goal %d, past %d", heap, headroom, p, g, want)
			}
			if g := goalAt(heap, base, p+1); g <= want {
				t.Errorf("heap %d, headroom %d: GOGC %d gives goal %d, short of %d", heap, headroom, p+1, g, want)
			}
		}
	}
}
