package mcp

import (
	"sync"
	"testing"
)

// The host's Shutdown and the owner's Close may each come more than once,
// in either order and at the same time.
func TestShutdownAndCloseIdempotent(t *testing.T) {
	p, _ := newTestPlugin(t, Options{}) // its cleanup closes it once more
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: got %v, want nil", err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := p.Shutdown(t.Context()); err != nil {
				t.Errorf("second Shutdown: got %v, want nil", err)
			}
			if err := p.Close(t.Context()); err != nil {
				t.Errorf("Close: got %v, want nil", err)
			}
		})
	}
	wg.Wait()
	if !p.sessions.ShuttingDown() {
		t.Error("got a plugin still serving after Shutdown, want it shutting down")
	}
}
