package mcp

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate/blocktransport"
)

// TestFollowMetered: following a transfer being written takes a rate
// token only when it learns nothing new (a poll); the first look, as any
// look at a manifest, takes one.
func TestFollowMetered(t *testing.T) {
	store := openStore(t, blocktransport.Options{BlockSize: 1024})
	p, _ := newTestPlugin(t, Options{Blocks: store})
	var tokens atomic.Int32
	srv := httptest.NewServer(meteredRouter(p, func(*gin.Context) { tokens.Add(1) }))
	t.Cleanup(srv.Close)
	w, err := store.Create("alice", "ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for range 300 { // two blocks of 1024 bytes closed, a third open
		if _, err := w.Write([]byte("{\"x\":1}\n")); err != nil {
			t.Fatal(err)
		}
	}
	look := func(query string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/mcp/blocks/"+w.ID()+query, nil)
		req.Header.Set("X-Sub", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", query, resp.StatusCode)
		}
	}
	for _, c := range []struct {
		query  string
		tokens int32
	}{
		{"", 1},                    // the first look
		{"?after=0&wait_ms=0", 0},  // news: blocks it did not know
		{"?after=1", 0},            // news
		{"?after=2&wait_ms=0", 1},  // nothing new at once: a poll
		{"?after=2&wait_ms=20", 1}, // nothing new within its wait
		{"?after=9&wait_ms=0", 1},  // nothing new
	} {
		before := tokens.Load()
		look(c.query)
		if got := tokens.Load() - before; got != c.tokens {
			t.Errorf("%q took %d tokens, want %d", c.query, got, c.tokens)
		}
	}
}
