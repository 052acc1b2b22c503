// Package route holds what the MCP plugin's HTTP routes share, in package
// mcp and its transports: the one way a route answers an error (Fail) and
// the forwarding of a request to the replica that owns its session or
// transfer (Forward). It must not import lakegate's query or server
// packages, or any other part of mcp.
package route

import (
	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/internal/httperr"
)

// Fail answers err itself, so that the plugin's errors are right on any
// router, and records it on c for the host's logs.
func Fail(c *gin.Context, err error) {
	_ = c.Error(err)
	httperr.Write(c.Writer, err)
	c.Abort()
}

// Forward hands a request for the session or transfer id to the replica
// of peers that owns it, in a cluster, and reports whether it did.
func Forward(peers host.Peers, c *gin.Context, id string) bool {
	if peers == nil || !peers.Forward(c.Writer, c.Request, id) {
		return false
	}
	c.Abort()
	return true
}
