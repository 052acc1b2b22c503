package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// The noisy reader: one subject runs her maximum of queries at once
// (max_queries_per_subject, 8 by default), each held on a lock so that it
// keeps its worker and database connection, while another subject's point
// query is timed, beside the same query on the idle server.
const (
	noisyQueries = 8
	noisyPoints  = 200
	noisyMarker  = "chaos_noisy_reader"
	pointSQL     = "SELECT * FROM readings WHERE id = 4242"
)

func noisyReader(ctx context.Context, e *env) (string, error) {
	s, err := e.newStage(ctx, false)
	if err != nil {
		return "", err
	}
	defer s.close()
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * noisyQueries}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	bob := e.token("bob", "reader")
	p50 := func() (time.Duration, error) {
		took := make([]time.Duration, noisyPoints)
		for i := range took {
			a := restSQL(ctx, hc, s.base, bob, pointSQL)
			if err := a.failure(); err != nil {
				return 0, fmt.Errorf("bob's point query: %w", err)
			}
			took[i] = a.took
		}
		return percentile(took, 0.5), nil
	}
	if _, err := p50(); err != nil { // warm up: connections, plans
		return "", err
	}
	idle, err := p50()
	if err != nil {
		return "", err
	}

	if err := s.lock(ctx); err != nil {
		return "", err
	}
	alice := e.token("alice", "reader")
	var noisy []<-chan answer
	for range noisyQueries {
		noisy = append(noisy, restSQLAsync(ctx, hc, s.base, alice, lockedQuery(noisyMarker)))
	}
	// Alice's queries answer once the lock is gone, whatever happens here.
	defer func() {
		s.unlock()
		for _, a := range noisy {
			<-a
		}
	}()
	if _, err := s.waitActive(ctx, noisyMarker, noisyQueries, 10*time.Second); err != nil {
		return "", fmt.Errorf("alice's queries: %w", err)
	}
	busy, err := p50()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("bob's point query p50 %.2f ms on the idle server, %.2f ms while alice holds her %d queries: ratio %.2f",
		ms(idle), ms(busy), noisyQueries, float64(busy)/float64(idle)), nil
}
