package integration

import (
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestZZProbeStreamableDrain(t *testing.T) {
	e := start(t, envOptions{drain: 5 * time.Second})
	tok := token(t, "alice", "reader")
	cs := e.connectHTTP(t, tok, "2025-06-18", nil)
	release := lockDevices(t, e.pool)
	res := make(chan error, 1)
	go func() {
		r, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": "SELECT count(*), 'mcpdrainmarker' FROM devices"}})
		if err == nil && r.IsError {
			t.Logf("tool error result: %+v", r.Content[0])
		}
		res <- err
	}()
	waitUntil(t, 10*time.Second, func() bool { return activeQueries(t, e.pool, "mcpdrainmarker") == 1 })
	begun := time.Now()
	done := make(chan error, 1)
	go func() { done <- e.shutdown() }()
	waitUntil(t, 10*time.Second, func() bool { return activeQueries(t, e.pool, "mcpdrainmarker") == 0 })
	t.Logf("MCP query gone %v after shutdown began", time.Since(begun))
	release()
	t.Logf("call: %v", <-res)
	t.Logf("serve: %v after %v", <-done, time.Since(begun))
}
