package tools

import (
	"context"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/internal/testutil"
)

// TestGrowStack: GrowStack grows the stack of a tool call, on the
// goroutine go-sdk runs it on, before the call goes deep, and leaves other
// methods' alone.
func TestGrowStack(t *testing.T) {
	copied := func(method string) bool {
		var deep bool
		h := GrowStack(func(context.Context, string, mcpsdk.Request) (mcpsdk.Result, error) {
			deep = testutil.DeepCallCopiesStack()
			return nil, nil
		})
		return testutil.OnNewGoroutine(func() bool {
			_, _ = h(t.Context(), method, nil)
			return deep
		})
	}
	if !copied("ping") {
		t.Skip("a new goroutine's stack already holds 12 KiB here: nothing to compare with")
	}
	if copied("tools/call") {
		t.Error("a tool call's deep call still copied its stack")
	}
}
