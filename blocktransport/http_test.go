package blocktransport

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testutil"
)

// TestServeAllFollowsWriting: the whole of a transfer being written is
// served as it is written: its sealed blocks at once, the rest as they are
// sealed, then its SHA-256 and row count as trailers. Aborted under a
// reader, the body is cut off, never ended cleanly.
func TestServeAllFollowsWriting(t *testing.T) {
	s := open(t, Options{BlockSize: 512})
	srv := server(t, s)
	defer srv.Client().CloseIdleConnections()
	get := func(id string) *http.Response {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + "/mcp/blocks/" + id + "/all")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET all: %v %v", resp, err)
		}
		return resp
	}
	recs := records(300)
	w, err := s.Create("alice", "ndjson")
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	put := func(w *Writer, from, to int) {
		for _, r := range recs[from:to] {
			if _, err := w.Write(r); err != nil {
				t.Fatal(err)
			}
			all = append(all, r...)
		}
	}
	put(w, 0, 100)
	testutil.Eventually(t, 5*time.Second, "sealed blocks", func() bool {
		m, _, err := s.Lookup(w.ID())
		return err == nil && len(m.Blocks) >= 2
	})
	m, _, _ := s.Lookup(w.ID())
	resp := get(w.ID())
	defer resp.Body.Close()
	if resp.Header.Get("X-Content-Sha256") != "" || resp.Header.Get("Trailer") == "" && len(resp.Trailer) == 0 {
		t.Errorf("being written: header %v, trailers announced %v; want the sum only as a trailer", resp.Header, resp.Trailer)
	}
	sealed := make([]byte, m.Bytes)
	if _, err := io.ReadFull(resp.Body, sealed); err != nil || !bytes.Equal(sealed, all[:m.Bytes]) {
		t.Fatalf("the sealed blocks, before the end: %v", err)
	}
	put(w, 100, 300)
	if _, err := w.Commit(300, nil); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(resp.Body)
	sum := sha256.Sum256(all)
	if err != nil || !bytes.Equal(append(sealed, rest...), all) {
		t.Fatalf("the whole: %d bytes then %v; want %d bytes", len(sealed)+len(rest), err, len(all))
	}
	if got := resp.Trailer.Get("X-Content-Sha256"); got != hex.EncodeToString(sum[:]) || resp.Trailer.Get("X-Row-Count") != "300" {
		t.Errorf("trailers %v; want sha256 %x and 300 rows", resp.Trailer, sum)
	}
	// The sum is kept: the manifest has it, and the next reader of the
	// whole gets it first, with the row count.
	if m, _, _ := s.Lookup(w.ID()); m.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("the manifest after a whole read: sha256 %q, want %x", m.SHA256, sum)
	}
	again := get(w.ID())
	_, _ = io.Copy(io.Discard, again.Body)
	again.Body.Close()
	if again.Header.Get("X-Content-Sha256") != hex.EncodeToString(sum[:]) || again.Header.Get("X-Row-Count") != "300" || len(again.Trailer) != 0 {
		t.Errorf("the whole read again: header %v, trailers %v; want the sum and the rows first", again.Header, again.Trailer)
	}

	// Aborted while a reader follows it: the reader gets an error.
	w2, _ := s.Create("alice", "ndjson")
	put(w2, 0, 50)
	resp2 := get(w2.ID())
	defer resp2.Body.Close()
	first := make([]byte, 100)
	if _, err := io.ReadFull(resp2.Body, first); err != nil {
		t.Fatal(err)
	}
	w2.Abort()
	if _, err := io.ReadAll(resp2.Body); err == nil {
		t.Error("the whole of an aborted transfer ended cleanly; want it cut off")
	}
}
