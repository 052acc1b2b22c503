package tools

import (
	"context"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/internal/stack"
)

// GrowStack is the outermost receiving middleware: a tool call, which
// go-sdk runs on a goroutine of its own, takes the stack it will need in
// one copy while the stack is shallow, instead of doubling it three or
// four times on the way down, each copy walking every frame then on it.
func GrowStack(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		if method == "tools/call" {
			stack.Grow()
		}
		return next(ctx, method, req)
	}
}
