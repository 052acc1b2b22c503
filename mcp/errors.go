package mcp

import (
	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/route"
)

// requireEnabled refuses every request while enabled reports false (the
// plugin is disabled).
func requireEnabled(enabled func() bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !enabled() {
			route.Fail(c, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "MCP is disabled on this server",
				Hint: "an admin can enable it with POST /admin/mcp/enable"})
		}
	}
}
