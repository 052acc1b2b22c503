package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lakegate/lakegate/internal/testutil"
)

// slowlorisReport is what the slowloris attack saw, printed as one JSON
// line.
type slowlorisReport struct {
	Opened     int     `json:"opened"`      // connections that were accepted at the TCP level
	DialFailed int     `json:"dial_failed"` // connections that could not be opened
	Closed     int     `json:"closed"`      // of the opened, closed by the server within the hold
	StillOpen  int     `json:"still_open"`  // of the opened, still open at the end of the hold
	CloseP50MS float64 `json:"close_p50_ms"`
	CloseMaxMS float64 `json:"close_max_ms"`
}

// slowloris opens many connections from a range of loopback addresses,
// each sending part of a request and then nothing: half of them headers
// without their end, half headers declaring a body that never comes. It
// holds them for -hold and reports how the server closed them.
func slowloris(args []string) error {
	fs := flag.NewFlagSet("slowloris", flag.ExitOnError)
	target := fs.String("target", "", "host:port of the server")
	conns := fs.Int("conns", 10000, "connections to open")
	from := fs.String("from", "127.0.0.2", "first loopback source address")
	addrs := fs.Int("addrs", 50, "source addresses to spread the connections over")
	hold := fs.Duration("hold", 15*time.Second, "how long to hold them")
	workers := fs.Int("dialers", 64, "connections opened at once")
	_ = fs.Parse(args)
	if *target == "" {
		return fmt.Errorf("slowloris: -target is required")
	}
	first := net.ParseIP(*from).To4()
	if first == nil {
		return fmt.Errorf("slowloris: -from %q: want an IPv4 address", *from)
	}

	var (
		mu      sync.Mutex
		closes  []time.Duration
		opened  atomic.Int64
		failed  atomic.Int64
		held    []net.Conn
		readers sync.WaitGroup
	)
	next := make(chan int)
	go func() {
		for i := range *conns {
			next <- i
		}
		close(next)
	}()
	var dialers sync.WaitGroup
	for range *workers {
		dialers.Go(func() {
			for i := range next {
				src := make(net.IP, 4)
				copy(src, first)
				src[3] += byte(i % *addrs)
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
				c, err := d.Dial("tcp", *target)
				if err != nil {
					failed.Add(1)
					continue
				}
				start := time.Now()
				req := "GET /health HTTP/1.1\r\nHost: x\r\nUser-Agent: slow"
				if i%2 == 1 {
					req = "POST /rest/sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"
				}
				_, _ = io.WriteString(c, req)
				opened.Add(1)
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
				readers.Go(func() {
					// Reads until the server closes the connection, or the
					// hold ends (then this side closes it).
					if _, err := io.Copy(io.Discard, c); err == nil || !isClosedByUs(err) {
						mu.Lock()
						closes = append(closes, time.Since(start))
						mu.Unlock()
					}
				})
			}
		})
	}
	dialers.Wait()
	fmt.Fprintf(os.Stderr, "slowloris: %d open, %d failed\n", opened.Load(), failed.Load())
	fmt.Println(`{"phase":"opened"}`)
	time.Sleep(*hold)
	mu.Lock()
	rep := slowlorisReport{Opened: int(opened.Load()), DialFailed: int(failed.Load()), Closed: len(closes)}
	rep.StillOpen = rep.Opened - rep.Closed
	sort.Slice(closes, func(i, j int) bool { return closes[i] < closes[j] })
	if n := len(closes); n > 0 {
		rep.CloseP50MS = ms(closes[n/2])
		rep.CloseMaxMS = ms(closes[n-1])
	}
	for _, c := range held {
		_ = c.Close()
	}
	mu.Unlock()
	readers.Wait()
	return json.NewEncoder(os.Stdout).Encode(rep)
}

func isClosedByUs(err error) bool { return err != nil && errorIsClosed(err) }

// The slowloris attack as `chaos all` runs it: floodConns half-open
// connections, split over child processes of this program (`chaos
// slowloris`) so that each stays within its descriptor limit, against a
// server with a 2 s header timeout and a cap of 2,000 connections. While
// they are held, /health and run_sql are timed on fresh connections.
const (
	floodConns         = 20000
	floodHeaderTimeout = 2 * time.Second
	floodHold          = floodHeaderTimeout + 3*time.Second // how long the children hold their connections
	floodProbes        = 20
)

func flood(ctx context.Context, e *env) (string, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return "", err
	}
	perProc := min(10000, int(rl.Cur)-256)
	if perProc < 500 {
		return "", fmt.Errorf("the descriptor limit %d is too low for the flood", rl.Cur)
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	s, err := e.startServer(ctx, "LAKEGATE_HEADER_TIMEOUT="+floodHeaderTimeout.String(), "LAKEGATE_MAX_CONNECTIONS=2000", "LAKEGATE_MAX_CONNECTIONS_PER_ADDRESS=256")
	if err != nil {
		return "", err
	}
	defer s.stop()

	var attackers []*attacker
	defer func() {
		for _, a := range attackers {
			a.stop()
		}
	}()
	for i, left := 0, floodConns; left > 0; i++ {
		n := min(left, perProc)
		left -= n
		// Odd attackers crowd 2 source addresses, past the per-address
		// cap of 256 (about half the 2,000 held are theirs); even ones
		// spread over 50.
		addrs := 50
		if i%2 == 1 {
			addrs = 2
		}
		a, err := startAttacker(ctx, self, "-target", s.addr(), "-conns", strconv.Itoa(n),
			"-from", fmt.Sprintf("127.0.%d.1", 1+i), "-addrs", strconv.Itoa(addrs),
			"-hold", floodHold.String())
		if err != nil {
			return "", err
		}
		attackers = append(attackers, a)
	}
	for _, a := range attackers {
		if err := a.opened(); err != nil {
			return "", err
		}
	}

	health, err := probeHealth(ctx, s.base)
	if err != nil {
		return "", fmt.Errorf("/health during the flood: %w", err)
	}
	calls, err := probeRunSQL(ctx, s.base, e.token("alice", "reader"))
	if err != nil {
		return "", fmt.Errorf("run_sql during the flood: %w", err)
	}
	var sum slowlorisReport
	for _, a := range attackers {
		rep, err := a.report()
		if err != nil {
			return "", err
		}
		sum.Opened += rep.Opened
		sum.DialFailed += rep.DialFailed
		sum.StillOpen += rep.StillOpen
		sum.CloseMaxMS = max(sum.CloseMaxMS, rep.CloseMaxMS)
	}
	figure := fmt.Sprintf("%d half-open connections from %d processes", sum.Opened, len(attackers))
	if sum.DialFailed > 0 {
		figure += fmt.Sprintf(" (%d more could not connect)", sum.DialFailed)
	}
	figure += fmt.Sprintf("; /health p50 %.1f ms max %.1f ms, run_sql p50 %.1f ms max %.1f ms",
		ms(percentile(health, 0.5)), ms(percentile(health, 1)), ms(percentile(calls, 0.5)), ms(percentile(calls, 1)))
	if sum.StillOpen == 0 {
		figure += fmt.Sprintf("; all closed within %.2f s (header timeout %v)", sum.CloseMaxMS/1000, floodHeaderTimeout)
	} else {
		figure += fmt.Sprintf("; %d still open after %.2f s (header timeout %v)", sum.StillOpen, ms(floodHold)/1000, floodHeaderTimeout)
	}
	switch {
	case sum.StillOpen > 0:
		return figure, fmt.Errorf("%d half-open connections outlived the header timeout", sum.StillOpen)
	case sum.CloseMaxMS > ms(floodHeaderTimeout+time.Second):
		return figure, fmt.Errorf("a half-open connection was closed after %.0f ms, past the header timeout", sum.CloseMaxMS)
	}
	return figure, nil
}

// attacker is a `chaos slowloris` child process.
type attacker struct {
	cmd    *exec.Cmd
	out    *bufio.Scanner
	stderr *testutil.Buffer
	waited bool
}

func startAttacker(ctx context.Context, self string, args ...string) (*attacker, error) {
	cmd := exec.CommandContext(ctx, self, append([]string{"slowloris"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	a := &attacker{cmd: cmd, out: bufio.NewScanner(out), stderr: &testutil.Buffer{}}
	cmd.Stderr = a.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start attacker: %w", err)
	}
	return a, nil
}

// opened waits until the child has opened all its connections.
func (a *attacker) opened() error {
	if !a.out.Scan() || !strings.Contains(a.out.Text(), `"opened"`) {
		return fmt.Errorf("attacker: %s", a.stderr.String())
	}
	return nil
}

// report waits for the child's report, at the end of its hold.
func (a *attacker) report() (slowlorisReport, error) {
	var rep slowlorisReport
	if !a.out.Scan() {
		return rep, fmt.Errorf("attacker report: %s", a.stderr.String())
	}
	if err := json.Unmarshal(a.out.Bytes(), &rep); err != nil {
		return rep, fmt.Errorf("attacker report: %w", err)
	}
	a.waited = true
	if err := a.cmd.Wait(); err != nil {
		return rep, fmt.Errorf("attacker: %w: %s", err, a.stderr.String())
	}
	return rep, nil
}

// stop kills the child if it was not waited for.
func (a *attacker) stop() {
	if !a.waited {
		_ = a.cmd.Process.Kill()
		_ = a.cmd.Wait()
	}
}

// probeHealth times GET /health, each on a new connection.
func probeHealth(ctx context.Context, base string) ([]time.Duration, error) {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	var took []time.Duration
	for range floodProbes {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		took = append(took, time.Since(start))
	}
	return took, nil
}

// probeRunSQL times run_sql calls in a Streamable HTTP session whose
// every request goes on a new connection.
func probeRunSQL(ctx context.Context, base, tok string) ([]time.Duration, error) {
	hc := &http.Client{Transport: testutil.Bearer{Token: tok, Base: &http.Transport{DisableKeepAlives: true}}, Timeout: 10 * time.Second}
	cs, err := connectMCP(ctx, "streamable", base, hc)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	var took []time.Duration
	for range floodProbes / 4 {
		start := time.Now()
		if err := runSQL(ctx, cs, "SELECT count(*) AS n FROM devices"); err != nil {
			return nil, err
		}
		took = append(took, time.Since(start))
	}
	return took, nil
}
