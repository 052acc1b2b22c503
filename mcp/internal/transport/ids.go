package transport

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/lakegate/lakegate/host"
)

// NewSessionID is a new session id: in a cluster (peers not nil), with
// this replica's prefix, by which the others forward its requests here.
func NewSessionID(peers host.Peers) string {
	id := newID()
	if peers != nil {
		prefix := peers.Prefix()
		id = prefix + id[len(prefix):]
	}
	return id
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
