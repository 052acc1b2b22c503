package testutil

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards the TCP connections made to Addr to a target once
// started, and refuses them while stopped: a database that goes away and
// comes back, for the real client and server on either side.
type Proxy struct {
	// Addr is the loopback address the proxy listens at while started.
	Addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
	wg    sync.WaitGroup
	turns atomic.Int64
}

// Turns counts the round trips clients began through the proxy: the
// bytes a client sends after the server has answered it (or first) begin
// one, however many reads they take.
func (p *Proxy) Turns() int64 { return p.turns.Load() }

// NewProxy returns a stopped proxy to target at a free loopback address;
// it is stopped when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target}
	_ = ln.Close()
	t.Cleanup(p.Stop)
	return p
}

// Start listens at Addr and forwards every connection to the target.
func (p *Proxy) Start(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			var answered atomic.Bool
			answered.Store(true)
			p.wg.Go(func() {
				_, _ = io.Copy(up, onRead(c, func() {
					if answered.Swap(false) {
						p.turns.Add(1)
					}
				}))
				_ = up.Close()
			})
			p.wg.Go(func() { _, _ = io.Copy(c, onRead(up, func() { answered.Store(true) })); _ = c.Close() })
		}
	})
}

// Stop closes the listener and every connection made through it, and
// waits for its goroutines: Addr refuses connections again. Start may
// follow.
func (p *Proxy) Stop() {
	p.mu.Lock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// onRead is r calling f each time it reads bytes, before they are passed on.
func onRead(r io.Reader, f func()) io.Reader { return readFunc{r, f} }

type readFunc struct {
	r io.Reader
	f func()
}

func (r readFunc) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if n > 0 {
		r.f()
	}
	return n, err
}
