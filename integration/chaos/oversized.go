package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Oversized inputs: an unknown admin command of 18 MB on POST / (the
// error should name it by a short excerpt, not send it back), and a
// JSON-RPC request on /mcp whose id no float64 or int64 holds (it should
// come back exactly as sent).
const (
	commandBytes = 18_000_000
	bigID        = "123456789012345678901234567890"
	maxErrorSize = 4096
)

// replyID is the id of the first JSON-RPC message in a reply (JSON or
// server-sent events).
var replyID = regexp.MustCompile(`"id":\s*("(?:[^"\\]|\\.)*"|[^,}\s]+)`)

func oversizedInputs(ctx context.Context, e *env) (string, error) {
	s, err := e.startServer(ctx)
	if err != nil {
		return "", err
	}
	defer s.stop()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	body, _ := json.Marshal(map[string]string{"command": "frobnicate " + strings.Repeat("x", commandBytes)})
	cmd := post(ctx, hc, s.base+"/", e.token("root", "admin"), body)
	if cmd.err != nil {
		return "", fmt.Errorf("unknown command: %w", cmd.err)
	}
	figure := fmt.Sprintf("unknown admin command: %.1f MB in, HTTP %d with %d bytes out", float64(len(body))/1e6, cmd.code, len(cmd.body))

	init := `{"jsonrpc":"2.0","id":` + bigID + `,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{},"clientInfo":{"name":"lakegate-chaos","version":"1"}}}`
	rpc := post(ctx, hc, s.base+"/mcp", e.token("alice", "reader"), []byte(init))
	if err := rpc.failure(); err != nil {
		return figure, fmt.Errorf("initialize with id %s: %w", bigID, err)
	}
	got := "no id"
	if m := replyID.FindSubmatch(rpc.body); m != nil {
		got = string(m[1])
	}
	figure += fmt.Sprintf("; JSON-RPC id %s on /mcp came back as %s", bigID, got)
	switch {
	case cmd.code != http.StatusBadRequest || len(cmd.body) > maxErrorSize:
		return figure, fmt.Errorf("want 400 with at most %d bytes", maxErrorSize)
	case got != bigID:
		return figure, fmt.Errorf("the id was not sent back as sent")
	}
	return figure, nil
}
