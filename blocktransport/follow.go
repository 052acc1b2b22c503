package blocktransport

import (
	"context"
	"slices"
	"time"
)

// Following a transfer being written: a reader asks for the manifest with
// the count of blocks it knows and is answered when there are more (or
// the transfer is complete or gone), instead of asking again and again.

// changedLocked wakes the Awaits. s.mu is held.
func (s *Store) changedLocked() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// MaxAwait bounds how long Await waits.
const MaxAwait = 5 * time.Second

// Await is Lookup for a reader following a transfer being written: it
// answers once the transfer has more than after blocks or is complete (or
// gone), or when wait (at most MaxAwait) has passed, or ctx ended, with
// the manifest as it is then.
func (s *Store) Await(ctx context.Context, id string, after int, wait time.Duration) (*Manifest, string, error) {
	timer := time.NewTimer(min(max(wait, 0), MaxAwait))
	defer timer.Stop()
	for {
		s.mu.Lock()
		t, ok := s.findLocked(id)
		if !ok {
			s.mu.Unlock()
			return nil, "", ErrNotFound
		}
		if t.manifest.Complete || len(t.manifest.Blocks) > after {
			m := t.manifest
			m.Blocks = slices.Clone(m.Blocks)
			s.mu.Unlock()
			return &m, t.owner, nil
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return s.Lookup(id)
		case <-ctx.Done():
			return s.Lookup(id)
		}
	}
}
