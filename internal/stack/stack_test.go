package stack

import (
	"testing"

	"github.com/lakegate/lakegate/internal/testutil"
)

// TestGrow: after Grow, a new goroutine makes a deep call without another
// copy of its stack; without it, the same call makes the runtime copy the
// goroutine's small stack.
func TestGrow(t *testing.T) {
	if !testutil.OnNewGoroutine(testutil.DeepCallCopiesStack) {
		t.Skip("a new goroutine's stack already holds 12 KiB here: nothing to compare with")
	}
	if testutil.OnNewGoroutine(func() bool { Grow(); return testutil.DeepCallCopiesStack() }) {
		t.Error("after Grow, a call with a 12 KiB frame still copied the stack")
	}
}

func BenchmarkGrow(b *testing.B) {
	for b.Loop() {
		testutil.OnNewGoroutine(func() bool { Grow(); return true })
	}
}
