package mcp

import (
	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate/internal/origin"
	"github.com/lakegate/lakegate/mcp/internal/route"
)

// checkOrigin guards the HTTP MCP routes against browsers (origin.Policy):
// only allowed origins, and loopback pages on a loopback listener.
func checkOrigin(allowed []string) gin.HandlerFunc {
	policy := origin.Policy{Allowed: allowed, Routes: "MCP routes", Setting: "mcp_allowed_origins", LoopbackHost: true}
	return func(c *gin.Context) {
		if err := policy.Check(c.Request); err != nil {
			route.Fail(c, err)
		}
	}
}
