//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package transport

import (
	"io"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watchOutput calls gone once, and returns, when the reading side of out
// is closed: for a pipe or a socket poll(2) reports an error or a hang-up
// on the writing side, which a process blocked in a long call could
// otherwise only learn by writing. It checks every interval until done is
// closed. An out without a file descriptor is not watched; neither is one
// that never reports hang-ups (a regular file).
func watchOutput(out io.Writer, done <-chan struct{}, interval time.Duration, gone func()) {
	sc, ok := out.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		closed := false
		// Control, not Fd: Fd would put the descriptor in blocking mode.
		if err := rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd)}} // no events: errors and hang-ups only
			if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
				closed = fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0
			}
		}); err != nil {
			return // out was closed
		}
		if closed {
			gone()
			return
		}
	}
}
