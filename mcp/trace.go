package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"time"

	"github.com/lakegate/lakegate/mcp/internal/wire"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// traceLimit caps the bytes of one traced message in the log.
const traceLimit = 4096

// secretField masks the string value of any JSON key that looks like it
// holds a secret, wherever it appears in a traced message.
var secretField = regexp.MustCompile(`(?i)("[^"]*(password|passwd|secret|token|authorization|api_?key)[^"]*"\s*:\s*)"(?:[^"\\]|\\.)*"`)

// traceMessages is the mcp_trace middleware, logging to log: one log line per MCP message
// received or sent, on every transport, with secrets masked and the
// payload cut at traceLimit bytes.
func traceMessages(log *slog.Logger, direction string) mcpsdk.Middleware {
	return func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			start := time.Now()
			res, err := next(ctx, method, req)
			attrs := []any{"direction", direction, "method", method, "duration_ms", time.Since(start).Milliseconds()}
			if s := req.GetSession(); s != nil {
				attrs = append(attrs, "session_id", s.ID())
			}
			attrs = wire.ExtraIDs(req.GetExtra(), attrs)
			attrs = append(attrs, "params", traceJSON(req.GetParams()))
			if err != nil {
				attrs = append(attrs, "error", err.Error())
			} else if res != nil {
				attrs = append(attrs, "result", traceJSON(res))
			}
			// Info, not Debug: the operator asked for it with mcp_trace.
			log.Info("mcp message", attrs...)
			return res, err
		}
	}
}

func traceJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "(unencodable)"
	}
	b = secretField.ReplaceAll(b, []byte(`$1"xxxxx"`))
	if len(b) > traceLimit {
		return string(b[:traceLimit]) + "...(cut)"
	}
	return string(b)
}
