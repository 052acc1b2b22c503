//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package transport

import (
	"io"
	"time"
)

// watchOutput does nothing here: without poll(2), a stdio client that is
// gone is noticed at the next write, or when its input ends and the drain
// passes.
func watchOutput(io.Writer, <-chan struct{}, time.Duration, func()) {}
