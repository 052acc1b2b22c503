package main

import (
	"context"
	"fmt"
)

// Stale sessions: connect, call, close, again and again under one token
// on Streamable HTTP, where close sends no DELETE (as the TypeScript SDK
// does: it closes its connections and forgets the session). Each cycle
// leaves an idle session behind; at the per-subject cap (64) the server
// should evict the idle ones rather than refuse the subject.
const staleCycles = 200

func staleSessions(ctx context.Context, e *env) (string, error) {
	s, err := e.startServer(ctx)
	if err != nil {
		return "", err
	}
	defer s.stop()
	tok := e.token("alice", "reader")
	answered, firstRefused, lastOK := 0, 0, 0
	var last error
	for i := 1; i <= staleCycles; i++ {
		if err := staleCycle(ctx, s.base, tok); err != nil {
			if firstRefused == 0 {
				firstRefused = i
			}
			last = err
			continue
		}
		answered++
		lastOK = i
	}
	figure := fmt.Sprintf("%d connect-call-close cycles without DELETE under one token on Streamable HTTP: %d answered", staleCycles, answered)
	if last == nil {
		return figure, nil
	}
	figure += fmt.Sprintf("; refused from cycle %d on (the last answered: cycle %d), the last refusal: %.160s", firstRefused, lastOK, last)
	return figure, fmt.Errorf("%d cycles refused: idle sessions were not evicted at the per-subject cap", staleCycles-answered)
}

// staleCycle connects, calls run_sql, and goes away without a DELETE.
func staleCycle(ctx context.Context, base, tok string) error {
	var k cuttable
	cs, err := connectMCP(ctx, "streamable", base, k.client(tok))
	if err != nil {
		k.cut()
		return err
	}
	err = runSQL(ctx, cs, "SELECT count(*) AS n FROM devices")
	k.cut() // the DELETE that Close sends next cannot reach the server
	_ = cs.Close()
	return err
}
