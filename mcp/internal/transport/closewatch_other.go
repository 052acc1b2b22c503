//go:build !linux

package transport

import "net"

// closeWatch watches nothing off Linux: taken-over streams look for a
// closed peer on their transport's ticker (peerClosed).
type closeWatch struct{}

var peerCloses closeWatch

func (closeWatch) watch(net.Conn, func()) (stop func(), ok bool) { return nil, false }
