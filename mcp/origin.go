package mcp

import (
	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate/internal/origin"
)

// checkOrigin guards the HTTP MCP routes against browsers (origin.Policy):
// only allow-listed origins, and loopback pages on a loopback listener.
func (p *Plugin) checkOrigin(c *gin.Context) {
	policy := origin.Policy{Allowed: p.opts.AllowedOrigins, Routes: "MCP routes", Setting: "mcp_allowed_origins", LoopbackHost: true}
	if err := policy.Check(c.Request); err != nil {
		fail(c, err)
	}
}
