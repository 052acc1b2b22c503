package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
