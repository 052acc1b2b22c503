//go:build linux

package transport

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

// closeWatch tells when the peers of connections taken over from the
// HTTP server close them, at once, with one goroutine for all of them
// (epoll, EPOLLRDHUP) and none per connection. The goroutine runs while
// a connection is watched.
type closeWatch struct {
	mu      sync.Mutex
	loop    *epollLoop // nil when none runs
	next    uint64
	watched map[uint64]watchEntry
}

type watchEntry struct {
	loop *epollLoop
	fd   int
	fn   func()
}

// epollLoop is one run of the watching goroutine: its epoll instance and
// the pipe that ends it.
type epollLoop struct{ epfd, stopR, stopW int }

// peerCloses watches the connections of the process's taken-over streams.
var peerCloses closeWatch

// watch calls fn once, from the watching goroutine, when nc's peer has
// closed it (or it failed). stop ends the watch and must be called before
// nc is closed. ok is false when nc cannot be watched: the caller looks
// for itself (peerClosed).
func (w *closeWatch) watch(nc net.Conn, fn func()) (stop func(), ok bool) {
	sc, isSys := unwrapConn(nc).(syscall.Conn)
	if !isSys {
		return nil, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	fd := -1
	if raw.Control(func(f uintptr) { fd = int(f) }) != nil || fd < 0 {
		return nil, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.loop == nil {
		l, err := startEpollLoop(w)
		if err != nil {
			return nil, false
		}
		w.loop = l
	}
	w.next++
	token := w.next
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | epollET, Fd: int32(uint32(token)), Pad: int32(uint32(token >> 32))}
	if err := syscall.EpollCtl(w.loop.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		w.stopIfIdleLocked()
		return nil, false
	}
	if w.watched == nil {
		w.watched = map[uint64]watchEntry{}
	}
	w.watched[token] = watchEntry{loop: w.loop, fd: fd, fn: fn}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.forgetLocked(token)
		w.stopIfIdleLocked()
	}, true
}

// epollET is EPOLLET as the EpollEvent field wants it.
const epollET = 1 << 31

// forgetLocked removes the watch of token, if any, and returns it.
// w.mu is held.
func (w *closeWatch) forgetLocked(token uint64) (watchEntry, bool) {
	e, ok := w.watched[token]
	if ok {
		delete(w.watched, token)
		_ = syscall.EpollCtl(e.loop.epfd, syscall.EPOLL_CTL_DEL, e.fd, nil)
	}
	return e, ok
}

// stopIfIdleLocked ends the watching goroutine once nothing is watched.
// w.mu is held.
func (w *closeWatch) stopIfIdleLocked() {
	if len(w.watched) > 0 || w.loop == nil {
		return
	}
	_, _ = syscall.Write(w.loop.stopW, []byte{1})
	w.loop = nil
}

// startEpollLoop makes an epoll instance with its stop pipe and starts
// the goroutine that waits on it.
func startEpollLoop(w *closeWatch) (*epollLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN} // token 0: stop
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p[0], &ev); err != nil {
		syscall.Close(epfd)
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, err
	}
	l := &epollLoop{epfd: epfd, stopR: p[0], stopW: p[1]}
	go w.run(l)
	return l, nil
}

// run waits for closes on l until its stop pipe is written, then closes
// l's descriptors.
func (w *closeWatch) run(l *epollLoop) {
	events := make([]syscall.EpollEvent, 64)
	for {
		n, err := syscall.EpollWait(l.epfd, events, -1)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			// Not expected: the next watch starts another loop. l's
			// descriptors stay open, so that no stop writes to a
			// number reused by another file.
			w.mu.Lock()
			if w.loop == l {
				w.loop = nil
			}
			w.mu.Unlock()
			return
		}
		for _, ev := range events[:n] {
			token := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if token == 0 {
				syscall.Close(l.epfd)
				syscall.Close(l.stopR)
				syscall.Close(l.stopW)
				return
			}
			if ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) == 0 {
				continue
			}
			w.mu.Lock()
			e, ok := w.forgetLocked(token)
			w.mu.Unlock()
			if ok {
				e.fn()
			}
		}
	}
}
