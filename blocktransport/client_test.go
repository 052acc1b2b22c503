package blocktransport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
)

// hit is one request the flaky server saw.
type hit struct {
	at     time.Time
	rng    string // the Range header
	status int    // what it answered (0: cut off mid-body)
}

// flaky serves a store over loopback as lakegate mounts it, answering the
// n-th request (from 0) for a block, or for the manifest (-1), with a
// planned fault instead of the data.
type flaky struct {
	t      *testing.T
	s      *Store
	plan   map[int][]fault // by block; -1: the manifest
	mu     sync.Mutex
	hits   map[int][]hit
	served map[int]int // 200 and 206 answers by block
}

// fault is one planned answer; the zero fault serves the data.
type fault struct {
	status     int     // the answer's status (429, 5xx, 404, ...)
	header     string  // its Retry-After header
	retryAfter float64 // its error body's retry_after
	cut        bool    // send half the block, then cut the connection
}

func newFlaky(t *testing.T, s *Store, plan map[int][]fault) (*flaky, *httptest.Server) {
	f := &flaky{t: t, s: s, plan: plan, hits: map[int][]hit{}, served: map[int]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mcp/blocks/{id}", func(w http.ResponseWriter, r *http.Request) {
		if f.fault(w, r, -1) {
			return
		}
		m, _, err := s.Lookup(r.PathValue("id"))
		if err != nil {
			http.Error(w, `{"error":{"message":"no such transfer"}}`, http.StatusNotFound)
			return
		}
		ServeManifest(w, m)
	})
	mux.HandleFunc("GET /mcp/blocks/{id}/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if f.fault(w, r, n) {
			return
		}
		if err := s.ServeBlock(w, r, r.PathValue("id"), n); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv
}

// fault answers request r for block n as planned, and records it. It
// reports whether it answered.
func (f *flaky) fault(w http.ResponseWriter, r *http.Request, n int) bool {
	f.mu.Lock()
	i := len(f.hits[n])
	var ft fault
	if i < len(f.plan[n]) {
		ft = f.plan[n][i]
	}
	status := ft.status
	switch {
	case ft.cut:
		status = 0
	case status == 0 && r.Header.Get("Range") != "":
		status = http.StatusPartialContent
	case status == 0:
		status = http.StatusOK
	}
	f.hits[n] = append(f.hits[n], hit{at: time.Now(), rng: r.Header.Get("Range"), status: status})
	if status == http.StatusOK || status == http.StatusPartialContent {
		f.served[n]++
	}
	f.mu.Unlock()
	switch {
	case ft.cut:
		fl, _, err := f.s.OpenBlock(r.PathValue("id"), n)
		if err != nil {
			f.t.Error(err)
			return true
		}
		defer fl.Close()
		st, _ := fl.Stat()
		half := make([]byte, st.Size()/2)
		_, _ = fl.Read(half)
		w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(half)
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	case ft.status != 0:
		if ft.header != "" {
			w.Header().Set("Retry-After", ft.header)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ft.status)
		if ft.retryAfter > 0 {
			fmt.Fprintf(w, `{"error":{"kind":"rate_limited","message":"slow down","retry_after":%g}}`, ft.retryAfter)
		} else {
			fmt.Fprintf(w, `{"error":{"kind":"unavailable","message":"planned %d"}}`, ft.status)
		}
		return true
	}
	return false
}

func (f *flaky) servedOf(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.served[n]
}

func (f *flaky) hitsOf(n int) []hit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]hit(nil), f.hits[n]...)
}

// TestClientRetries: a fetch through 429s (Retry-After as a header, and
// as the error's retry_after), 5xx answers and a connection cut mid-block
// completes; it waits as told, asks only for the rest of a cut block, and
// never fetches a checked block again.
func TestClientRetries(t *testing.T) {
	s := open(t, Options{BlockSize: 512})
	m, all := write(t, s, "alice", records(400))
	if len(m.Blocks) < 12 {
		t.Fatalf("got %d blocks, want at least 12", len(m.Blocks))
	}
	f, srv := newFlaky(t, s, map[int][]fault{
		-1: {{status: 429, retryAfter: 0.05, header: "1"}},
		2:  {{status: 429, header: "1"}},
		5:  {{status: 503}, {status: 502}},
		7:  {{status: 500}, {status: 429, retryAfter: 0.3, header: "1"}},
		9:  {{cut: true}},
		11: {{status: 408}},
	})
	defer srv.Client().CloseIdleConnections()
	var (
		mu      sync.Mutex
		retries []Retry
	)
	c := &Client{BaseURL: srv.URL + "/mcp/blocks", DecodeError: lakegate.DecodeError, HTTP: srv.Client(), Parallel: 4, Backoff: 20 * time.Millisecond,
		Retrying: func(r Retry) { mu.Lock(); retries = append(retries, r); mu.Unlock() }}
	start := time.Now()
	var out bytes.Buffer
	got, err := c.Fetch(t.Context(), m.ID, &out)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if !bytes.Equal(out.Bytes(), all) || got.SHA256 != m.SHA256 {
		t.Fatalf("got %d bytes, want the %d bytes of the transfer", out.Len(), len(all))
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the fetch took %v, want at least the 1 s block 2's Retry-After asked for", d)
	}

	// Every block was served once: none fetched again once checked.
	for n := range m.Blocks {
		if got := f.servedOf(n); got != 1 {
			t.Errorf("block %d: served %d times, want 1 (hits %+v)", n, got, f.hitsOf(n))
		}
	}
	for _, tc := range []struct {
		block   int
		hits    int
		waitMin time.Duration // between the last two hits
	}{
		{-1, 2, 50 * time.Millisecond}, // retry_after wins over the rounded header
		{2, 2, time.Second},            // the header alone
		{5, 3, 0},
		{7, 3, 300 * time.Millisecond},
		{9, 2, 0},
		{11, 2, 0},
		{0, 1, 0},
	} {
		h := f.hitsOf(tc.block)
		if len(h) != tc.hits {
			t.Errorf("block %d: %d requests, want %d: %+v", tc.block, len(h), tc.hits, h)
			continue
		}
		if len(h) < 2 {
			continue
		}
		if d := h[len(h)-1].at.Sub(h[len(h)-2].at); d < tc.waitMin {
			t.Errorf("block %d: retried after %v, want at least %v", tc.block, d, tc.waitMin)
		}
	}
	if h := f.hitsOf(-1); len(h) == 2 && h[1].at.Sub(h[0].at) >= time.Second {
		t.Errorf("manifest: retried after %v, want the body's 0.05 s, not the header's 1 s", h[1].at.Sub(h[0].at))
	}
	// The cut block is continued, not started over.
	if h := f.hitsOf(9); len(h) == 2 {
		size := m.Blocks[9].Size
		if want := "bytes=" + strconv.FormatInt(size/2, 10) + "-"; h[1].rng != want || h[1].status != http.StatusPartialContent {
			t.Errorf("block 9 after a cut: asked %q (answer %d), want %q (206)", h[1].rng, h[1].status, want)
		}
	}
	if len(retries) != 8 {
		t.Errorf("Retrying called %d times, want 8: %+v", len(retries), retries)
	}
	for _, r := range retries {
		if r.Err == nil || r.Attempt < 1 || r.Wait <= 0 {
			t.Errorf("Retrying got %+v, want an error, an attempt and a wait", r)
		}
	}
}

// TestClientGivesUp: retries are bounded, and what cannot be cured is not
// retried.
func TestClientGivesUp(t *testing.T) {
	s := open(t, Options{BlockSize: 512})
	m, _ := write(t, s, "alice", records(100))
	always := func(ft fault, n int) []fault {
		out := make([]fault, n)
		for i := range out {
			out[i] = ft
		}
		return out
	}
	tests := []struct {
		name     string
		plan     []fault
		attempts int
		hits     int
		want     []string
	}{
		{"5xx until the attempts run out", always(fault{status: 503}, 10), 3, 3, []string{"after 3 attempts", "503"}},
		{"default attempts", always(fault{status: 500}, 10), 0, DefaultAttempts, []string{"after 6 attempts"}},
		{"404 is final", []fault{{status: 404}}, 3, 1, []string{"404"}},
		{"a wait over MaxRetryAfter is not waited", []fault{{status: 429, header: "3600"}}, 3, 1, []string{"429", "wait 1h0m0s"}},
		{"429 without end", always(fault{status: 429, retryAfter: 0.001}, maxThrottled+5), 3, maxThrottled + 1, []string{"refused 101 times with 429"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFlaky(t, s, map[int][]fault{1: tc.plan})
			defer srv.Client().CloseIdleConnections()
			c := &Client{BaseURL: srv.URL + "/mcp/blocks", DecodeError: lakegate.DecodeError, HTTP: srv.Client(), Parallel: 2, Attempts: tc.attempts, Backoff: time.Millisecond}
			_, err := c.Fetch(t.Context(), m.ID, &bytes.Buffer{})
			if err == nil {
				t.Fatal("got nil, want an error")
			}
			for _, w := range append(tc.want, "block 1 of "+m.ID) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want it to contain %q", err, w)
				}
			}
			if h := f.hitsOf(1); len(h) != tc.hits {
				t.Errorf("got %d requests for block 1, want %d", len(h), tc.hits)
			}
		})
	}

	t.Run("cancel during a pause", func(t *testing.T) {
		_, srv := newFlaky(t, s, map[int][]fault{-1: {{status: 429, header: "30"}}})
		defer srv.Client().CloseIdleConnections()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		c := &Client{BaseURL: srv.URL + "/mcp/blocks", DecodeError: lakegate.DecodeError, HTTP: srv.Client()}
		if _, err := c.Fetch(ctx, m.ID, &bytes.Buffer{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v, want the context's deadline", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("returned after %v, want at once after the cancel", d)
		}
	})
	t.Run("bad server URL", func(t *testing.T) {
		c := &Client{BaseURL: "127.0.0.1:1"}
		if _, err := c.Fetch(t.Context(), m.ID, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "want one such as https://") {
			t.Errorf("got %v, want a URL error", err)
		}
	})
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 0 ", 0},
		{"-4", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
	} {
		if got := retryAfter(tc.in, now); got != tc.want {
			t.Errorf("retryAfter(%q): got %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestFetchFollowsWriting: a transfer being written shows its sealed
// blocks (each readable, with its sum; a later block is not sealed yet),
// and Fetch follows it: it writes the first block
// while the rest is still to come, and ends with every byte, checked, once
// the transfer is committed. Aborted under a following Fetch, the fetch
// fails instead of waiting.
func TestFetchFollowsWriting(t *testing.T) {
	s := open(t, Options{BlockSize: 512})
	f, srv := newFlaky(t, s, nil)
	defer srv.Client().CloseIdleConnections()
	w, err := s.Create("alice", "ndjson")
	if err != nil {
		t.Fatal(err)
	}
	recs := records(300)
	var all []byte
	put := func(from, to int) {
		for _, r := range recs[from:to] {
			if _, err := w.Write(r); err != nil {
				t.Fatal(err)
			}
			all = append(all, r...)
		}
	}
	put(0, 100)
	testutil.Eventually(t, 5*time.Second, "sealed blocks", func() bool {
		m, _, err := s.Lookup(w.ID())
		return err == nil && len(m.Blocks) >= 2
	})
	m, owner, _ := s.Lookup(w.ID())
	if m.Complete || owner != "alice" || m.SHA256 != "" || m.Blocks[0].CRC32C == "" {
		t.Errorf("being written: got %+v, want its sealed blocks and no end", m)
	}
	if _, _, err := s.ReadBlock(w.ID(), 0); err != nil {
		t.Errorf("a sealed block: %v", err)
	}
	if _, _, err := s.OpenBlock(w.ID(), 50); !errors.Is(err, ErrNotSealed) {
		t.Errorf("a block not yet written: got %v, want ErrNotSealed", err)
	}
	c := &Client{BaseURL: srv.URL + "/mcp/blocks", DecodeError: lakegate.DecodeError, HTTP: srv.Client(), FollowInterval: 10 * time.Millisecond}
	firstBytes := make(chan struct{})
	var once sync.Once
	c.Progress = func(int64, int64) { once.Do(func() { close(firstBytes) }) }
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := c.Fetch(t.Context(), w.ID(), &out)
		done <- err
	}()
	select {
	case <-firstBytes:
	case err := <-done:
		t.Fatalf("fetch ended before the transfer did: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no block fetched while the transfer was written")
	}
	put(100, 300)
	final, err := w.Commit(300, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if !bytes.Equal(out.Bytes(), all) || !final.Complete {
		t.Errorf("fetched %d bytes, want the %d of the transfer", out.Len(), len(all))
	}

	// Aborted while followed (its manifest asked for twice more): the
	// fetch fails.
	w2, _ := s.Create("alice", "ndjson")
	asked := len(f.hitsOf(-1))
	go func() {
		_, err := c.Fetch(t.Context(), w2.ID(), io.Discard)
		done <- err
	}()
	testutil.Eventually(t, 10*time.Second, "the fetch follows", func() bool { return len(f.hitsOf(-1)) >= asked+2 })
	w2.Abort()
	if err := <-done; err == nil {
		t.Error("fetch of an aborted transfer: got no error")
	}
}

// Every block is checked against its manifest's sum, and the whole against
// the complete manifest: one that names other sums for the blocks fetched
// while the transfer was followed fails the fetch (no second hash of the
// whole is needed to notice).
func TestFetchChecksTheCompleteManifest(t *testing.T) {
	s := open(t, Options{BlockSize: 512})
	w, err := s.Create("alice", "ndjson")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records(100) {
		if _, err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	m, err := w.Commit(100, nil)
	if err != nil || len(m.Blocks) < 3 {
		t.Fatalf("commit: %v, %d blocks", err, len(m.Blocks))
	}
	for _, tc := range []struct {
		name   string
		final  func(m Manifest) Manifest
		failed bool
	}{
		{"as written", func(m Manifest) Manifest { return m }, false},
		{"another sum for a block fetched", func(m Manifest) Manifest {
			m.Blocks = slices.Clone(m.Blocks)
			m.Blocks[1].CRC32C = "00000000"
			return m
		}, true},
		{"other bytes in all", func(m Manifest) Manifest { m.Bytes++; return m }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("GET /mcp/blocks/{id}", func(rw http.ResponseWriter, r *http.Request) {
				got := *m
				if asked.Add(1) == 1 { // first: being written, two blocks sealed
					got.Complete, got.Blocks, got.SHA256 = false, m.Blocks[:2], ""
				} else {
					got = tc.final(got)
				}
				ServeManifest(rw, &got)
			})
			mux.HandleFunc("GET /mcp/blocks/{id}/{n}", func(rw http.ResponseWriter, r *http.Request) {
				n, _ := strconv.Atoi(r.PathValue("n"))
				_ = s.ServeBlock(rw, r, r.PathValue("id"), n)
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			c := &Client{BaseURL: srv.URL + "/mcp/blocks", HTTP: srv.Client(), FollowInterval: time.Millisecond}
			_, err := c.Fetch(t.Context(), m.ID, io.Discard)
			if (err != nil) != tc.failed {
				t.Errorf("got %v, want failed %v", err, tc.failed)
			}
		})
	}
}
