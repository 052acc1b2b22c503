// Package gctune keeps the garbage collector's heap goal at least a fixed
// headroom above the live heap.
//
// Go's collector runs when the heap has grown by GOGC percent of the live
// heap (100: doubled), and at 4 MiB at least. A server whose live heap is
// a few MiB but which allocates a few hundred KB per request then
// collects every few requests, and marking is most of what a request
// costs. Raising GOGC helps, but it grows with the live heap: GOGC=400 on
// a 150 MiB live heap lets 600 MiB of garbage build up. Headroom is an
// absolute bound instead: the goal is the live heap plus headroom, or
// twice the live heap when that is more. After every collection the
// tuner sets GOGC to what gives that goal.
//
// The runtime's 4 MiB floor scales with GOGC too (GOGC=800 makes it
// 32 MiB), so on a small live heap a GOGC worked out from the live heap
// alone overshoots: 32 MiB of headroom over 1.7 MiB live would set a goal
// of 75 MiB. The tuner takes the lesser GOGC that floor allows.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the GOGC the tuner sets (a live heap of a few KB).
const maxPercent = 100_000

// heapMinimum is the runtime's least heap goal at GOGC=100; at GOGC=p it
// is heapMinimum × p/100 (runtime/mgcpacer.go, defaultHeapMinimum).
const heapMinimum = 4 << 20

// Start keeps the heap goal at least headroom bytes above the live heap
// until stop is called, which puts GOGC back as it was. headroom <= 0
// does nothing.
func Start(headroom int64) (stop func()) {
	if headroom <= 0 {
		return func() {}
	}
	orig := debug.SetGCPercent(100) // reads GOGC, put back at once
	debug.SetGCPercent(orig)
	t := &tuner{headroom: uint64(headroom), orig: orig, last: orig}
	t.arm()
	return t.stop
}

type tuner struct {
	headroom uint64

	mu      sync.Mutex
	orig    int // GOGC before Start
	last    int // GOGC last set
	stopped bool
}

// arm runs tune after the next collection: a cleanup of an object nothing
// refers to runs once a collection has found it unreachable.
func (t *tuner) arm() {
	sentinel := &struct{ _ *int }{}
	runtime.AddCleanup(sentinel, func(t *tuner) {
		if t.tune() {
			t.arm()
		}
	}, t)
}

// tune sets GOGC for what the last collection left live; false once
// stopped.
func (t *tuner) tune() bool {
	heap, base := live()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	p := Percent(heap, base, t.headroom)
	if p != t.last {
		debug.SetGCPercent(p)
		t.last = p
	}
	return true
}

func (t *tuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(t.orig)
	}
}

// live is what the last collection left: the live heap, and what GOGC is
// a percentage of (the live heap, the goroutine stacks and the globals
// together).
func live() (heap, base uint64) {
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(samples)
	var n [3]uint64
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			n[i] = s.Value.Uint64()
		}
	}
	return n[0], n[0] + n[1] + n[2]
}

// GOGC is the collector's target percentage as now set (100 unless GOGC
// or SetGCPercent changed it; 0 when off).
func GOGC() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Percent is the GOGC whose heap goal is heap + headroom, and at least
// 100. The runtime's goal at GOGC=p is heap + base × p/100, and at least
// heapMinimum × p/100: heap is the live heap, base what GOGC is a
// percentage of (the live heap, stacks, globals).
func Percent(heap, base, headroom uint64) int {
	p := (heap + headroom) * 100 / heapMinimum
	if base > 0 {
		p = min(p, headroom*100/base)
	}
	return int(min(max(p, 100), maxPercent))
}
