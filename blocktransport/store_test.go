package blocktransport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lakegate/lakegate"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// records returns n NDJSON-like lines of varying length.
func records(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("[%d,%q]\n", i, strings.Repeat("x", i%97)))
	}
	return out
}

func open(t *testing.T, o Options) *Store {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// write puts recs into a new transfer, a few records per Write.
func write(t *testing.T, s *Store, owner string, recs [][]byte) (*Manifest, []byte) {
	t.Helper()
	w, err := s.Create(owner, "ndjson")
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for i := 0; i < len(recs); i += 3 {
		var chunk []byte
		for _, r := range recs[i:min(i+3, len(recs))] {
			chunk = append(chunk, r...)
		}
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
		all = append(all, chunk...)
	}
	m, err := w.Commit(int64(len(recs)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, all
}

func TestBlocksEndOnWrites(t *testing.T) {
	s := open(t, Options{BlockSize: 1024})
	m, all := write(t, s, "alice", records(500))
	var got []byte
	for _, b := range m.Blocks {
		data, _, err := s.ReadBlock(m.ID, b.N)
		if err != nil {
			t.Fatal(err)
		}
		// A block is closed before a write that would pass the size, so it
		// is at most BlockSize unless one write alone is larger.
		if b.Size > 1024 || data[len(data)-1] != '\n' {
			t.Errorf("block %d: %d bytes ending %q, want <= 1024 ending a record", b.N, b.Size, data[len(data)-1])
		}
		got = append(got, data...)
	}
	if !bytes.Equal(got, all) || m.Bytes != int64(len(all)) || len(m.Blocks) < 10 {
		t.Errorf("got %d bytes in %d blocks, want the %d bytes written", len(got), len(m.Blocks), len(all))
	}
	// A write larger than a block makes one large block.
	w, _ := s.Create("alice", "ndjson")
	big := append(bytes.Repeat([]byte("y"), 5000), '\n')
	w.Write([]byte("a\n"))
	w.Write(big)
	m2, err := w.Commit(2, nil)
	if err != nil || len(m2.Blocks) != 2 || m2.Blocks[1].Size != int64(len(big)) {
		t.Errorf("big write: got %+v %v, want a second block of %d bytes", m2, err, len(big))
	}
	if _, err := w.Write([]byte("z\n")); err == nil {
		t.Error("write after commit succeeded")
	}
	w.Abort() // after commit: nothing happens
	if _, _, err := s.Lookup(m2.ID); err != nil {
		t.Errorf("abort after commit removed the transfer: %v", err)
	}
}

func TestBudgetsAndAbort(t *testing.T) {
	s := open(t, Options{BlockSize: 256, MaxBytes: 4000, MaxBytesPerOwner: 3000})
	var be *BudgetError
	// One transfer alone over the owner's budget: waiting will not help.
	w, _ := s.Create("alice", "ndjson")
	var err error
	for i := 0; err == nil && i < 100; i++ {
		_, err = w.Write(bytes.Repeat([]byte("a"), 99))
	}
	if !errors.As(err, &be) || !be.Owner || !be.Whole || be.Limit != 3000 {
		t.Fatalf("got %v, want the owner's budget error for the whole transfer", err)
	}
	if _, err := w.Commit(1, nil); err == nil {
		t.Error("commit after a budget error succeeded")
	}
	if st := s.Stats(); st.Bytes != 0 || st.Transfers != 0 || st.Aborted != 1 {
		t.Errorf("after a failed transfer: %+v, want nothing kept", st)
	}
	if entries, _ := os.ReadDir(s.opts.Dir); len(entries) != 0 {
		t.Errorf("%d entries left in the spool", len(entries))
	}
	// Over the owner's budget with earlier transfers: retry when they expire.
	write(t, s, "alice", [][]byte{bytes.Repeat([]byte("a"), 2000)})
	w, _ = s.Create("alice", "ndjson")
	if _, err := w.Write(bytes.Repeat([]byte("a"), 1500)); !errors.As(err, &be) || !be.Owner || be.Whole || be.RetryAfter < time.Second {
		t.Errorf("got %v, want the owner's budget error with a retry time", err)
	}
	w.Abort()
	// The store's budget binds across owners.
	w, _ = s.Create("carol", "ndjson")
	if _, err := w.Write(bytes.Repeat([]byte("c"), 2500)); !errors.As(err, &be) || be.Owner || be.Whole {
		t.Errorf("got %v, want the store's budget error", err)
	}
	w.Abort()
	w.Abort() // twice is fine
	if st := s.Stats(); st.Bytes != 2000 || st.Transfers != 1 {
		t.Errorf("stats: %+v, want alice's 2000 bytes only", st)
	}
}

func TestExpiryAndRestart(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s, err := Open(Options{Dir: dir, TTL: time.Minute, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := write(t, s, "alice", records(10))
	if !m.Expires.Equal(now.Add(time.Minute)) {
		t.Errorf("expires %s, want created + TTL", m.Expires)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if _, _, err := s.Lookup(m.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("lookup at the TTL: got %v, want ErrNotFound", err)
	}
	if _, _, err := s.OpenBlock(m.ID, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("open block at the TTL: got %v, want ErrNotFound", err)
	}
	s.Expire()
	if _, err := os.Stat(filepath.Join(dir, m.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("expired transfer still on disk: %v", err)
	}
	// A transfer left by a run that did not close is removed at the next
	// Open; other files are left alone.
	m2, _ := write(t, s, "alice", records(10))
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("x"), 0o600)
	s2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, m2.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old transfer survived a restart: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep.txt")); err != nil {
		t.Errorf("restart removed a file that is not a transfer: %v", err)
	}
	if err := s2.Close(t.Context()); err != nil {
		t.Errorf("close: got %v, want nil", err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Errorf("close: got %v, want nil", err)
	}
	if _, err := s.Create("alice", "ndjson"); !errors.Is(err, ErrClosed) {
		t.Errorf("create after close: got %v, want ErrClosed", err)
	}
}

// The sweeper deletes a transfer, files and all, at the tick that finds
// its TTL passed, with nobody calling Expire.
func TestSweeperDeletesExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s, err := Open(Options{Dir: dir, TTL: DefaultTTL})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		m, _ := write(t, s, "alice", records(10))
		onDisk := func() bool {
			_, err := os.Stat(filepath.Join(dir, m.ID))
			return err == nil
		}
		time.Sleep(DefaultTTL - time.Nanosecond)
		synctest.Wait()
		if !onDisk() || s.Stats().Expired != 0 {
			t.Fatalf("just before its TTL: on disk %v, %d expired; want it kept", onDisk(), s.Stats().Expired)
		}
		// The TTL is a whole number of the sweeper's ticks (a minute).
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if onDisk() || s.Stats().Expired != 1 {
			t.Errorf("at its TTL: on disk %v, %d expired; want it deleted", onDisk(), s.Stats().Expired)
		}
	})
}

func TestStoreCloseIdempotent(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := write(t, s, "alice", records(10))
	// A ctx already done may end the wait, never the release.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("close with a done ctx: got %v, want nil or context.Canceled", err)
	}
	for i := range 2 {
		if err := s.Close(t.Context()); err != nil {
			t.Errorf("close %d: got %v, want nil", i+2, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, m.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("transfer still on disk after close: %v", err)
	}
	if _, _, err := s.Lookup(m.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("lookup after close: got %v, want ErrNotFound", err)
	}
}

// server serves a store the way lakegate mounts it, without auth.
func server(t *testing.T, s *Store) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mcp/blocks/{id}", func(w http.ResponseWriter, r *http.Request) {
		m, _, err := s.Lookup(r.PathValue("id"))
		if err != nil {
			http.Error(w, `{"error":{"message":"no such transfer"}}`, http.StatusNotFound)
			return
		}
		ServeManifest(w, m)
	})
	mux.HandleFunc("GET /mcp/blocks/{id}/{n}", func(w http.ResponseWriter, r *http.Request) {
		var err error
		if r.PathValue("n") == "all" {
			err = s.ServeAll(w, r, r.PathValue("id"))
		} else {
			n, _ := strconv.Atoi(r.PathValue("n"))
			err = s.ServeBlock(w, r, r.PathValue("id"), n)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestClientFetch(t *testing.T) {
	s := open(t, Options{BlockSize: 512})
	m, all := write(t, s, "alice", records(400))
	srv := server(t, s)
	defer srv.Client().CloseIdleConnections()
	for _, parallel := range []int{1, 3, 16} {
		var out bytes.Buffer
		var calls int
		var last int64
		c := &Client{BaseURL: srv.URL + "/mcp/blocks", DecodeError: lakegate.DecodeError, HTTP: srv.Client(), Parallel: parallel,
			Progress: func(done, total int64) { calls++; last = done }}
		got, err := c.Fetch(context.Background(), m.ID, &out)
		if err != nil {
			t.Fatalf("parallel %d: %v", parallel, err)
		}
		if !bytes.Equal(out.Bytes(), all) || got.SHA256 != m.SHA256 || calls != len(m.Blocks) || last != m.Bytes {
			t.Errorf("parallel %d: got %d bytes, %d progress calls ending at %d; want %d bytes, %d calls", parallel, out.Len(), calls, last, len(all), len(m.Blocks))
		}
	}
	// A damaged block is refused, whatever the parallelism.
	path := filepath.Join(s.opts.Dir, m.ID, "3")
	data, _ := os.ReadFile(path)
	data[0] ^= 1
	os.WriteFile(path, data, 0o600)
	c := &Client{BaseURL: srv.URL + "/mcp/blocks", DecodeError: lakegate.DecodeError, HTTP: srv.Client(), Parallel: 4}
	var ce *ChecksumError
	if _, err := c.Fetch(context.Background(), m.ID, &bytes.Buffer{}); !errors.As(err, &ce) {
		t.Errorf("damaged block: got %v, want a checksum error", err)
	}
	var se *StatusError
	if _, err := c.Fetch(context.Background(), "nope", &bytes.Buffer{}); !errors.As(err, &se) || se.Code != 404 || !strings.Contains(err.Error(), "no such transfer") {
		t.Errorf("unknown transfer: got %v, want a 404 with the server's message", err)
	}
}

func TestListAndDelete(t *testing.T) {
	s := open(t, Options{BlockSize: 256, MaxBytes: 1 << 20})
	a1, _ := write(t, s, "alice", records(50))
	b1, _ := write(t, s, "bob", records(5))
	a2, _ := write(t, s, "alice", records(3))

	ids := func(l []Summary) []string {
		var out []string
		for _, ti := range l {
			out = append(out, ti.ID)
		}
		return out
	}
	if got := ids(s.List("alice")); !slices.Equal(got, []string{a1.ID, a2.ID}) {
		t.Errorf("alice's: got %v, want %v", got, []string{a1.ID, a2.ID})
	}
	if got := ids(s.List("")); !slices.Equal(got, []string{a1.ID, b1.ID, a2.ID}) {
		t.Errorf("everyone's: got %v, want oldest first %v", got, []string{a1.ID, b1.ID, a2.ID})
	}
	if got := s.List("alice")[0]; got.Owner != "alice" || got.Rows != 50 || got.Bytes != a1.Bytes ||
		got.Blocks != len(a1.Blocks) || got.Blocks < 2 || got.Format != "ndjson" || !got.Expires.Equal(a1.Expires) {
		t.Errorf("got %+v, want the manifest's figures %+v", got, a1)
	}

	before := s.Stats().Bytes
	if err := s.Delete(a1.ID); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got.Bytes != before-a1.Bytes || got.Deleted != 1 {
		t.Errorf("after delete: %d bytes, %d deleted; want %d, 1", got.Bytes, got.Deleted, before-a1.Bytes)
	}
	if _, _, err := s.Lookup(a1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("lookup after delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.opts.Dir, a1.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("deleted transfer still on disk: %v", err)
	}
	if err := s.Delete(a1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: got %v, want ErrNotFound", err)
	}
	if got := ids(s.List("alice")); !slices.Equal(got, []string{a2.ID}) {
		t.Errorf("after delete: got %v", got)
	}
}

// Await answers a follower as soon as a block is sealed or the transfer
// commits, and after its wait otherwise (virtual time: synctest).
func TestAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, Options{BlockSize: 1024})
		w, err := s.Create("alice", "ndjson")
		if err != nil {
			t.Fatal(err)
		}
		id := w.ID()
		start := time.Now()
		got := make(chan *Manifest, 1)
		go func() {
			m, _, err := s.Await(t.Context(), id, 0, time.Minute)
			if err != nil {
				t.Error(err)
			}
			got <- m
		}()
		synctest.Wait() // the follower waits
		for _, r := range records(60) {
			if _, err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if m := <-got; len(m.Blocks) == 0 || time.Since(start) >= MaxAwait {
			t.Errorf("after %v: %d blocks, want one as soon as it was sealed", time.Since(start), len(m.Blocks))
		}
		// Nothing new (every block written is sealed): the wait's end
		// answers what there is.
		synctest.Wait()
		m, _, _ := s.Lookup(id)
		start = time.Now()
		again, _, err := s.Await(t.Context(), id, len(m.Blocks), time.Second)
		if err != nil || len(again.Blocks) != len(m.Blocks) || time.Since(start) != time.Second {
			t.Errorf("a wait with nothing new: %v, %d blocks after %v", err, len(again.Blocks), time.Since(start))
		}
		// The commit answers at once, complete.
		go func() {
			m, _, err := s.Await(t.Context(), id, 1<<20, MaxAwait)
			if err != nil {
				t.Error(err)
			}
			got <- m
		}()
		synctest.Wait()
		start = time.Now()
		if _, err := w.Commit(60, nil); err != nil {
			t.Fatal(err)
		}
		if m := <-got; !m.Complete || time.Since(start) != 0 {
			t.Errorf("after the commit: complete %v after %v", m.Complete, time.Since(start))
		}
		if _, _, err := s.Await(t.Context(), "00000000000000000000000000000000", 0, time.Second); !errors.Is(err, ErrNotFound) {
			t.Errorf("an unknown transfer: %v", err)
		}
	})
}
