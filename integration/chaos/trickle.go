package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The trickle attack (issue 21): tricklers authenticated POST /rest/sql
// connections from the probes' own address, as many as
// max_connections_per_address lets it hold, each declaring a
// 100,000-byte body and sending a byte of it every trickleEvery, and
// coming back trickleReconnect after the server closes one. For
// trickleProbing, /health and a real query are timed from that address on
// fresh connections; each must answer within a second.
const (
	tricklers        = 1024 // the default max_connections_per_address
	trickleEvery     = 8 * time.Second
	trickleReconnect = time.Second
	trickleProbing   = 20 * time.Second
	trickleBound     = time.Second
)

func trickle(ctx context.Context, e *env) (string, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return "", err
	}
	if int(rl.Cur) < tricklers+256 {
		return "", fmt.Errorf("the descriptor limit %d is too low for %d tricklers", rl.Cur, tricklers)
	}
	s, err := e.startServer(ctx, fmt.Sprintf("LAKEGATE_MAX_CONNECTIONS_PER_ADDRESS=%d", tricklers))
	if err != nil {
		return "", err
	}
	defer s.stop()
	tok := e.token("alice", "reader")

	actx, cancel := context.WithCancel(ctx)
	var (
		wg       sync.WaitGroup
		inBody   atomic.Int64 // tricklers whose body the server is reading
		pushed   atomic.Int64 // tricklers the server closed
		failures atomic.Int64 // tricklers that failed otherwise
		firstErr atomic.Value // of them, the first error
	)
	defer func() { cancel(); wg.Wait() }()
	ready := make(chan struct{}, tricklers)
	for range tricklers {
		wg.Go(func() {
			first := true
			for actx.Err() == nil {
				switch err := trickleOnce(actx, s.addr(), tok, func() {
					inBody.Add(1)
					if first {
						first = false
						ready <- struct{}{}
					}
				}); {
				case err == nil:
					pushed.Add(1)
				case actx.Err() == nil:
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				select {
				case <-actx.Done():
				case <-time.After(trickleReconnect):
				}
			}
		})
	}
	for range tricklers { // each has had its body asked for once
		select {
		case <-ready:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}

	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	var health, query []time.Duration
	var failed []string
	probe := time.NewTicker(250 * time.Millisecond)
	defer probe.Stop()
	for end := time.After(trickleProbing); ; {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-end:
		case <-probe.C:
			start := time.Now()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/health", nil)
			if resp, err := hc.Do(req); err != nil {
				failed = append(failed, "/health: "+err.Error())
			} else {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed = append(failed, fmt.Sprintf("/health: HTTP %d", resp.StatusCode))
				}
			}
			health = append(health, time.Since(start))
			a := restSQL(ctx, hc, s.base, tok, "SELECT count(*) AS n FROM devices")
			if err := a.failure(); err != nil {
				failed = append(failed, "query: "+err.Error())
			}
			query = append(query, a.took)
			continue
		}
		break
	}
	figure := fmt.Sprintf("%d connections trickling authenticated POST /rest/sql bodies (a byte every %v, back %v after a close) from the probes' address at max_connections_per_address %d; "+
		"/health p50 %.1f ms max %.1f ms, query p50 %.1f ms max %.1f ms, %d of %d answered; %d trickling requests begun, %d pushed out",
		tricklers, trickleEvery, trickleReconnect, tricklers,
		ms(percentile(health, 0.5)), ms(percentile(health, 1)), ms(percentile(query, 0.5)), ms(percentile(query, 1)),
		2*len(health)-len(failed), 2*len(health), inBody.Load(), pushed.Load())
	if n := failures.Load(); n > 0 {
		figure += fmt.Sprintf(" (%d failed otherwise, the first: %v)", n, firstErr.Load())
	}
	switch slowest := max(percentile(health, 1), percentile(query, 1)); {
	case len(failed) > 0:
		return figure, fmt.Errorf("%d probes failed, the first: %s", len(failed), failed[0])
	case slowest > trickleBound:
		return figure, fmt.Errorf("a probe took %v, past %v", slowest, trickleBound)
	}
	return figure, nil
}

// trickleOnce opens one trickling connection: its request head with
// Expect: 100-continue, so that the server asking for the body says its
// handler is reading it (then inBody is called), then a byte of the body
// every trickleEvery. It returns nil once the server closes the
// connection, or an error if it could not start or ctx ended.
func trickleOnce(ctx context.Context, addr, tok string, inBody func()) error {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "POST /rest/sql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tok+
		"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	switch {
	case err != nil:
		return err
	case !strings.HasPrefix(status, "HTTP/1.1 100 "):
		return fmt.Errorf("trickler: got %q, want 100 Continue", strings.TrimSpace(status))
	}
	if _, err := br.ReadString('\n'); err != nil { // the blank line after it
		return err
	}
	inBody()
	buf := make([]byte, 512)
	for {
		_ = c.SetDeadline(time.Now().Add(trickleEvery))
		if _, err := io.WriteString(c, " "); err != nil {
			return closedOrErr(ctx, err)
		}
		for {
			// Whatever the server says (an answer at read_timeout) is
			// read until it closes.
			if _, err = br.Read(buf); err != nil {
				break
			}
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || ctx.Err() != nil {
			return closedOrErr(ctx, err)
		}
	}
}

// closedOrErr is nil for the server closing the connection (EOF, reset),
// else err.
func closedOrErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return err
}
