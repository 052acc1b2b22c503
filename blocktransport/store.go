package blocktransport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate"
)

// Defaults of Options.
const (
	DefaultBlockSize = 1 << 20
	DefaultTTL       = 15 * time.Minute
)

// Manifest describes one transfer: what a client needs to fetch its
// blocks and check them. A transfer still being written has Complete
// false and lists only its sealed blocks (each final, with its CRC-32C),
// without Rows or Expires: a client fetches those and asks again.
type Manifest struct {
	ID       string `json:"transfer_id"`
	Format   string `json:"format"`
	Complete bool   `json:"complete"`
	// Columns is the caller's description of the columns, passed through.
	Columns json.RawMessage `json:"columns,omitempty"`
	Rows    int64           `json:"rows"`
	Bytes   int64           `json:"bytes"`
	// SHA256 is the hex SHA-256 of the whole result (the blocks in
	// order), once a reader of the whole (ServeAll) has computed it: the
	// blocks' CRC-32Cs are the check every reader has, and most results in
	// blocks are never read whole.
	SHA256  string    `json:"sha256,omitempty"`
	Blocks  []Block   `json:"blocks"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Block is one block of a transfer. CRC32C is the CRC-32C (Castagnoli)
// of its bytes, 8 hex digits: the check a client makes of each block, as
// cloud object stores do, where the manifest's SHA-256 covers the whole.
type Block struct {
	N      int    `json:"n"`
	Size   int64  `json:"size"`
	CRC32C string `json:"crc32c"`
}

// Options tune a Store. The zero value of each field is its default.
type Options struct {
	// Dir is the spool directory (required). Transfers left there by an
	// earlier run are deleted by Open.
	Dir string
	// BlockSize is the size a block is closed at (default 1 MiB). Blocks
	// end between two writes, so a block is larger when one write is.
	BlockSize int64
	// TTL is how long a committed transfer can be read (default 15m).
	TTL time.Duration
	// MaxBytes bounds the bytes of all transfers, MaxBytesPerOwner those
	// of one owner (0: no bound).
	MaxBytes         int64
	MaxBytesPerOwner int64
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
	// IDPrefix begins every transfer id (hex, at most 16 characters): a
	// cluster's replica prefix, so that any replica can tell the owner.
	IDPrefix string
}

// Stats counts a Store's work.
type Stats struct {
	// Transfers and Bytes are what is stored now (committed and in progress).
	Transfers int   `json:"transfers"`
	Bytes     int64 `json:"bytes"`
	// Created, Blocks and Written count since start: transfers committed,
	// blocks written and bytes written.
	Created int64 `json:"created"`
	Blocks  int64 `json:"blocks_written"`
	Written int64 `json:"bytes_written"`
	// Aborted counts transfers removed before commit (errors, budgets,
	// cancellation); Expired those deleted at their TTL.
	Aborted int64 `json:"aborted"`
	Expired int64 `json:"expired"`
	// Deleted counts transfers deleted before their TTL (Delete).
	Deleted int64 `json:"deleted"`
}

// Store keeps transfers as block files under a spool directory, with a
// TTL and byte budgets. It is safe for concurrent use. Whoever calls
// [Open] owns the Store and closes it ([Store.Close]), after the values
// that write or read transfers through it (an MCP plugin) are closed.
type Store struct {
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	transfers map[string]*transfer // committed
	writing   map[string]*transfer // being written: their sealed blocks
	pending   int                  // transfers being written
	used      int64
	usedBy    map[string]int64
	stats     Stats
	closed    bool
	// changed is closed, and replaced, when a transfer being written
	// seals a block, commits or goes (Await).
	changed chan struct{}

	stop chan struct{} // closed by Close: the sweeper stops
	done chan struct{} // closed by the sweeper as it ends

	// released is closed once Close has deleted the transfers, closeErr
	// set before it; both are set by the first Close.
	released chan struct{}
	closeErr error
}

type transfer struct {
	owner    string
	dir      string
	manifest Manifest
}

// idPattern is the form of transfer ids (and of their directories).
var idPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Open makes the spool directory, deletes the transfers an earlier run
// left in it, and starts the expiry sweeper, which Close stops.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		return nil, errors.New("blocktransport: a spool directory is required")
	}
	if len(o.IDPrefix) > 16 || !idPattern.MatchString(o.IDPrefix+strings.Repeat("0", 32-len(o.IDPrefix))) {
		return nil, fmt.Errorf("blocktransport: id prefix %q: want at most 16 hex digits", o.IDPrefix)
	}
	if o.BlockSize <= 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Store{opts: o, log: o.Logger, transfers: map[string]*transfer{}, writing: map[string]*transfer{}, usedBy: map[string]int64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("blocktransport: spool directory: %w", err)
	}
	entries, err := os.ReadDir(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("blocktransport: spool directory: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && idPattern.MatchString(e.Name()) {
			if err := os.RemoveAll(filepath.Join(o.Dir, e.Name())); err != nil {
				return nil, fmt.Errorf("blocktransport: clean spool directory: %w", err)
			}
		}
	}
	go s.sweep()
	return s, nil
}

// TTL is how long a committed transfer can be read.
func (s *Store) TTL() time.Duration { return s.opts.TTL }

// Close refuses new transfers, stops the sweeper and deletes every
// committed transfer (the reverse of Open), waiting for that until ctx
// ends; then it returns ctx's error, and the release goes on. Writers not
// yet committed are their callers' to Abort. It is idempotent: a later call
// waits for the same release within its own ctx and returns the same
// error.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		dirs := make([]string, 0, len(s.transfers))
		for id, t := range s.transfers {
			dirs = append(dirs, t.dir)
			delete(s.transfers, id)
		}
		s.released = make(chan struct{})
		close(s.stop)
		go s.release(dirs)
	}
	released := s.released
	s.mu.Unlock()
	select {
	case <-released:
		return s.closeErr
	default:
	}
	select {
	case <-released:
		return s.closeErr
	case <-ctx.Done():
		return fmt.Errorf("blocktransport: close: %w", ctx.Err())
	}
}

// release waits for the sweeper to end, then deletes dirs; Close started
// it.
func (s *Store) release(dirs []string) {
	defer close(s.released)
	<-s.done
	errs := make([]error, 0, len(dirs))
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	s.closeErr = errors.Join(errs...)
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Transfers = len(s.transfers) + s.pending
	st.Bytes = s.used
	return st
}

// sweep deletes expired transfers until Close.
func (s *Store) sweep() {
	defer close(s.done)
	t := time.NewTicker(min(s.opts.TTL/4, time.Minute))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Expire()
		}
	}
}

// Expire deletes the transfers whose TTL has passed. The sweeper calls it;
// it is exported for tests and operators.
func (s *Store) Expire() {
	now := s.opts.Now()
	var gone []*transfer
	s.mu.Lock()
	for id, t := range s.transfers {
		if !now.Before(t.manifest.Expires) {
			delete(s.transfers, id)
			s.releaseLocked(t.owner, t.manifest.Bytes)
			s.stats.Expired++
			gone = append(gone, t)
		}
	}
	s.mu.Unlock()
	for _, t := range gone {
		if err := os.RemoveAll(t.dir); err != nil {
			s.log.Warn("delete expired transfer", "transfer", t.manifest.ID, lakegate.LogError, err.Error())
		}
	}
}

// reserve takes n more bytes of the budgets for a transfer of owner that
// holds have bytes already.
func (s *Store) reserve(owner string, have, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	for _, limit := range []int64{s.opts.MaxBytesPerOwner, s.opts.MaxBytes} {
		if limit > 0 && have+n > limit {
			return &BudgetError{Owner: limit == s.opts.MaxBytesPerOwner, Limit: limit, Whole: true}
		}
	}
	if s.opts.MaxBytesPerOwner > 0 && s.usedBy[owner]+n > s.opts.MaxBytesPerOwner {
		return &BudgetError{Owner: true, Limit: s.opts.MaxBytesPerOwner, RetryAfter: s.oldestExpiryLocked(owner)}
	}
	if s.opts.MaxBytes > 0 && s.used+n > s.opts.MaxBytes {
		return &BudgetError{Limit: s.opts.MaxBytes}
	}
	s.used += n
	s.usedBy[owner] += n
	return nil
}

func (s *Store) releaseLocked(owner string, n int64) {
	s.used -= n
	if s.usedBy[owner] -= n; s.usedBy[owner] <= 0 {
		delete(s.usedBy, owner)
	}
}

// oldestExpiryLocked is the time until owner's first transfer expires
// (at least a second).
func (s *Store) oldestExpiryLocked(owner string) time.Duration {
	wait := s.opts.TTL
	now := s.opts.Now()
	for _, t := range s.transfers {
		if t.owner == owner {
			wait = min(wait, t.manifest.Expires.Sub(now))
		}
	}
	return max(wait, time.Second)
}

// Create starts a transfer for owner in format (a name like "ndjson" or
// "csv", recorded in the manifest). Write the records to the returned
// Writer, then Commit or Abort it: one of them must be called, as the
// Writer runs a goroutine until then.
func (s *Store) Create(owner, format string) (*Writer, error) {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	id = s.opts.IDPrefix + id[len(s.opts.IDPrefix):]
	dir := filepath.Join(s.opts.Dir, id)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.pending++
	s.mu.Unlock()
	if err := os.Mkdir(dir, 0o700); err != nil {
		s.mu.Lock()
		s.pending--
		s.mu.Unlock()
		return nil, fmt.Errorf("blocktransport: create transfer: %w", err)
	}
	now := s.opts.Now().UTC()
	w := &Writer{s: s, owner: owner, dir: dir,
		m: Manifest{ID: id, Format: format, Created: now, Blocks: []Block{}}}
	s.mu.Lock()
	s.writing[id] = &transfer{owner: owner, dir: dir, manifest: Manifest{ID: id, Format: format, Created: now, Blocks: []Block{}}}
	s.mu.Unlock()
	return w, nil
}

// setSum records sum, the SHA-256 of the whole of transfer id, which a
// reader computed, while the transfer is kept.
func (s *Store) setSum(id, sum string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.transfers[id]; ok {
		t.manifest.SHA256 = sum
	}
}

// sealed counts block b of transfer id, being written, and, when its file
// is whole (ok), makes it readable.
func (s *Store) sealed(id string, b Block, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Blocks++
	if !ok {
		return
	}
	if t, found := s.writing[id]; found {
		t.manifest.Blocks = append(t.manifest.Blocks, b)
		t.manifest.Bytes += b.Size
	}
	s.changedLocked()
}

// findLocked is transfer id, committed and unexpired or being written. s.mu is
// held.
func (s *Store) findLocked(id string) (*transfer, bool) {
	if t, ok := s.transfers[id]; ok && s.opts.Now().Before(t.manifest.Expires) {
		return t, true
	}
	t, ok := s.writing[id]
	return t, ok
}

// Lookup returns the manifest of a transfer and its owner: committed
// and unexpired, or being written (Complete false, its sealed blocks).
// Unknown and expired ids are ErrNotFound.
func (s *Store) Lookup(id string) (*Manifest, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.findLocked(id)
	if !ok {
		return nil, "", ErrNotFound
	}
	m := t.manifest
	m.Blocks = slices.Clone(m.Blocks)
	return &m, t.owner, nil
}

// Summary describes one committed transfer, as List reports it.
type Summary struct {
	ID, Owner, Format string
	Rows, Bytes       int64
	Blocks            int
	Created, Expires  time.Time
}

// List describes the committed, unexpired transfers of owner ("": of
// every owner), oldest first.
func (s *Store) List(owner string) []Summary {
	now := s.opts.Now()
	s.mu.Lock()
	out := make([]Summary, 0, len(s.transfers))
	for _, t := range s.transfers {
		if (owner == "" || t.owner == owner) && now.Before(t.manifest.Expires) {
			m := &t.manifest
			out = append(out, Summary{ID: m.ID, Owner: t.owner, Format: m.Format, Rows: m.Rows, Bytes: m.Bytes,
				Blocks: len(m.Blocks), Created: m.Created, Expires: m.Expires})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Summary) int { return a.Created.Compare(b.Created) })
	return out
}

// Delete deletes the committed transfer id before its TTL. Readers that
// have a block open finish reading it.
func (s *Store) Delete(id string) error {
	s.mu.Lock()
	t, ok := s.transfers[id]
	if ok {
		delete(s.transfers, id)
		s.releaseLocked(t.owner, t.manifest.Bytes)
		s.stats.Deleted++
	}
	s.mu.Unlock()
	if !ok {
		return ErrNotFound
	}
	if err := os.RemoveAll(t.dir); err != nil {
		return fmt.Errorf("blocktransport: delete transfer: %w", err)
	}
	return nil
}

// OpenBlock opens block n of transfer id for reading: committed, or a
// sealed block of one being written (a later one is ErrNotSealed). The
// file stays readable after the transfer expires while it is open.
func (s *Store) OpenBlock(id string, n int) (*os.File, Block, error) {
	s.mu.Lock()
	t, ok := s.findLocked(id)
	if !ok {
		s.mu.Unlock()
		return nil, Block{}, ErrNotFound
	}
	if n >= len(t.manifest.Blocks) && !t.manifest.Complete && n >= 0 {
		s.mu.Unlock()
		return nil, Block{}, ErrNotSealed
	}
	if n < 0 || n >= len(t.manifest.Blocks) {
		s.mu.Unlock()
		return nil, Block{}, ErrNoBlock
	}
	b, dir := t.manifest.Blocks[n], t.dir
	s.mu.Unlock()
	f, err := os.Open(filepath.Join(dir, strconv.Itoa(n)))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, Block{}, ErrNotFound
		}
		return nil, Block{}, fmt.Errorf("blocktransport: open block: %w", err)
	}
	return f, b, nil
}

// ReadBlock reads block n of transfer id whole and checks its CRC-32C, so
// a block damaged on disk is an error, not data.
func (s *Store) ReadBlock(id string, n int) ([]byte, Block, error) {
	f, b, err := s.OpenBlock(id, n)
	if err != nil {
		return nil, Block{}, err
	}
	defer f.Close()
	data := make([]byte, b.Size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, Block{}, fmt.Errorf("blocktransport: read block %d: %w", n, err)
	}
	if err := Verify(data, b); err != nil {
		return nil, Block{}, fmt.Errorf("block %d: %w", n, err)
	}
	return data, b, nil
}
