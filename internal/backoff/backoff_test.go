package backoff

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// Each pause is within half and all of the doubled base, never past the
// cap, and a pause that huge shifts would overflow stays at the cap.
func TestDelay(t *testing.T) {
	p := Policy{Base: 50 * time.Millisecond, Cap: time.Second}
	for n := 1; n <= 70; n++ {
		full := min(p.Base<<min(n-1, 10), p.Cap)
		for range 50 {
			if d := p.Delay(n); d < full/2 || d > full {
				t.Fatalf("attempt %d: got %v, want within [%v, %v]", n, d, full/2, full)
			}
		}
	}
	long := Policy{Base: time.Second, Cap: 30 * time.Second}
	if d := long.Delay(1000); d < 15*time.Second || d > 30*time.Second {
		t.Errorf("attempt 1000: got %v, want within the cap's half and whole", d)
	}
}

// Wait runs out after its pause, and ends at once with its context.
func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Wait(t.Context(), 3*time.Second) || time.Since(start) != 3*time.Second {
			t.Errorf("got a wait of %v, want 3s run out", time.Since(start))
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		start = time.Now()
		if Wait(ctx, time.Hour) || time.Since(start) != time.Second {
			t.Errorf("got a wait of %v, want it cut at 1s by its context", time.Since(start))
		}
	})
}
