package mcp

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/gin-gonic/gin"
	"github.com/lakegate/lakegate/host"
)

// newSessionID is a new session id: in a cluster (peers not nil), with
// this replica's prefix, by which the others forward its requests here.
func newSessionID(peers host.Peers) string {
	id := newID()
	if peers != nil {
		prefix := peers.Prefix()
		id = prefix + id[len(prefix):]
	}
	return id
}

// forward hands a request for the session or transfer id to the replica
// of peers that owns it, in a cluster, and reports whether it did.
func forward(peers host.Peers, c *gin.Context, id string) bool {
	if peers == nil || !peers.Forward(c.Writer, c.Request, id) {
		return false
	}
	c.Abort()
	return true
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
