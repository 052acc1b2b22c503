package main

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"time"
)

// SIGTERM mid-query: a REST query blocked on a lock, then SIGTERM to the
// server. The query cannot finish within the drain (drain_timeout, 2 s
// here to keep the run short), so when the drain ends the server should
// stop it, in PostgreSQL too, answer 503 with Retry-After, and exit 0.
const (
	sigtermMarker = "chaos_sigterm"
	drain         = 2 * time.Second
)

func sigtermMidQuery(ctx context.Context, e *env) (string, error) {
	s, err := e.newStage(ctx, true, "LAKEGATE_DRAIN_TIMEOUT="+drain.String())
	if err != nil {
		return "", err
	}
	defer s.close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	reply := restSQLAsync(ctx, &http.Client{Transport: tr}, s.base, e.token("alice", "reader"), lockedQuery(sigtermMarker))
	defer func() {
		s.unlock()
		if reply != nil {
			<-reply
		}
	}()
	if _, err := s.waitActive(ctx, sigtermMarker, 1, 10*time.Second); err != nil {
		return "", err
	}

	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return "", err
	}
	a := <-reply
	answered := time.Since(start)
	reply = nil // received
	if a.err != nil {
		return "", fmt.Errorf("the query got no answer: %w", a.err)
	}
	code, err := s.exitCode(drain + 20*time.Second)
	if err != nil {
		return "", err
	}
	exited := time.Since(start)
	retry := a.head.Get("Retry-After")
	if retry == "" {
		retry = "none"
	}
	figure := fmt.Sprintf("a REST query blocked on a lock got HTTP %d, Retry-After %s, %.2f s after SIGTERM; the process exited with status %d after %.2f s (drain_timeout %v)",
		a.code, retry, answered.Seconds(), code, exited.Seconds(), drain)
	left, err := s.waitActive(ctx, sigtermMarker, 0, 5*time.Second)
	if err != nil {
		return figure, fmt.Errorf("the query outlived the server: %w", err)
	}
	figure += fmt.Sprintf("; the query was gone from PostgreSQL %.0f ms later", ms(left))
	switch {
	case a.code != http.StatusServiceUnavailable || retry == "none":
		return figure, fmt.Errorf("want 503 with Retry-After, got %d: %.200s", a.code, a.body)
	case code != 0:
		return figure, fmt.Errorf("exit code %d, want 0", code)
	}
	return figure, nil
}
