package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The vanished client: an MCP client calls run_sql with a query blocked
// on a lock, then all its connections drop, as when its process dies. The
// server should cancel the call and its query should leave PostgreSQL at
// once, not run on for nobody; measured on legacy SSE and Streamable HTTP.
const vanishBound = time.Second

func vanishedClient(ctx context.Context, e *env) (string, error) {
	s, err := e.newStage(ctx, true)
	if err != nil {
		return "", err
	}
	defer s.close()

	tok := e.token("alice", "reader")
	var took []string
	figure := func() string {
		return "run_sql blocked on a lock, then the client's connections cut: the query left pg_stat_activity after " + strings.Join(took, ", ")
	}
	for _, transport := range []string{"sse", "streamable"} {
		d, err := vanish(ctx, s, tok, transport)
		if err != nil {
			return "", fmt.Errorf("%s: %w", transport, err)
		}
		took = append(took, fmt.Sprintf("%.1f ms (%s)", ms(d), transport))
		if d > vanishBound {
			return figure(), fmt.Errorf("on %s the query ran %v after its client went away, want under %v", transport, d, vanishBound)
		}
	}
	return figure(), nil
}

// vanish makes one client vanish mid-call on transport and returns how
// long its query ran on in PostgreSQL.
func vanish(ctx context.Context, s *stage, tok, transport string) (time.Duration, error) {
	var k cuttable
	cs, err := connectMCP(ctx, transport, s.base, k.client(tok))
	if err != nil {
		k.cut()
		return 0, err
	}
	marker := "chaos_vanish_" + transport
	called := make(chan error, 1)
	go func() { called <- runSQL(ctx, cs, lockedQuery(marker)) }()
	defer func() {
		k.cut()
		_ = cs.Close()
		<-called
	}()
	if _, err := s.waitActive(ctx, marker, 1, 10*time.Second); err != nil {
		return 0, err
	}
	k.cut()
	return s.waitActive(ctx, marker, 0, 10*time.Second)
}
