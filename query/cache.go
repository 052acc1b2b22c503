package query

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/query/sqlbuild"
)

// The result cache: a read repeated within Options.ResultCacheTTL, by a
// caller with the same access, is answered from memory. An entry is one
// statement's rows as the source gave them (cells copied), with the
// source's summary; a hit replays them through the same sink path as a
// run, so that cursors, gaps and budgets come out as they did. The cache
// is bounded in bytes, in all and per subject (least recently used go
// first); lakegate's own ingest into a database, on any replica, empties
// the database's entries. Rows other programs write are seen once the TTL
// has passed.

// maxCacheEntry bounds the cells of one entry: a larger result is not
// kept (it streams, as before).
const maxCacheEntry = 1 << 20

// A paged result's entry is keyed by the request, not the page, and holds
// rows from a place in the whole result on (base): any page inside them
// is answered from it, whatever its row cap. A page asked with a cursor
// (the caller is paging) reads ahead, up to aheadPages more pages (at
// most maxAheadRows rows, within maxCacheEntry bytes), so that the pages
// after it come from memory; a first page reads only itself.
const (
	aheadPages   = 10
	maxAheadRows = 10_000
)

// errEnough stops a run that read ahead as far as its entry may hold: a
// source ends there as if at its row cap.
var errEnough = errors.New("query: read ahead far enough")

// cellOverhead is what one cell costs in an entry besides its bytes.
const cellOverhead = 48

// CacheInfo says whether a result was answered from the cache, and how
// old the answer is.
type CacheInfo struct {
	Hit   bool  `json:"hit"`
	AgeMS int64 `json:"age_ms"`
}

// CacheStats is the cache's state, for metrics.
type CacheStats struct {
	Entries                   int
	Bytes                     int64
	Hits, Misses, Evictions   uint64
	MaxBytes, MaxSubjectBytes int64
}

type resultCache struct {
	ttl              time.Duration
	maxBytes, perSub int64

	mu      sync.Mutex
	entries map[[32]byte]*list.Element // of *cacheEntry
	lru     list.List                  // front: the most recently used
	bytes   int64
	bySub   map[string]int64
	// gens counts each database's forgets: a read that began before one
	// keeps nothing (its rows may be older than the ingest).
	gens map[string]uint64

	hits, misses, evictions atomic.Uint64
}

type cacheEntry struct {
	key     [32]byte
	subject string
	db      string
	at      time.Time
	cols    []ResultColumn
	// rows are the result's from base on; res.Truncated says more
	// followed them.
	rows [][]Cell
	base int
	// lead, when known, are the keys of the row before base (the
	// cursor its run began after); keys are the request's order, for
	// keyset pages.
	lead []any
	keys []sqlbuild.Key
	res  Result // the source's summary, before Run adds to it
	size int64
}

// newResultCache is a cache of ttl and maxBytes, a quarter of it at most
// per subject; nil (off) when either is zero.
func newResultCache(ttl time.Duration, maxBytes int64) *resultCache {
	if ttl <= 0 || maxBytes <= 0 {
		return nil
	}
	return &resultCache{ttl: ttl, maxBytes: maxBytes, perSub: max(maxBytes/4, 1),
		entries: map[[32]byte]*list.Element{}, bySub: map[string]int64{}, gens: map[string]uint64{}}
}

// generation is db's count of forgets, read when a read begins.
func (c *resultCache) generation(db string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gens[db]
}

// paged says whether s's entry is its request's (from its place in the
// result on), not its own text's: s can be paged and its place is known.
func (s *Stmt) paged() bool { return s.hash != "" && s.start.place() >= 0 }

// cacheKey names what a statement answers for whom: the database, the
// access it runs under (the caller's access rules, PostgreSQL role and
// search path), and the request it pages through, or else the text it
// runs, its arguments and row cap.
func (s *Stmt) cacheKey() [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %t ", s.Database, s.g.who, s.role, s.pinPath)
	if s.paged() {
		fmt.Fprintf(h, "pages %q", s.hash)
	} else {
		fmt.Fprintf(h, "%d %q", s.Limit, s.text)
		for _, a := range s.args {
			fmt.Fprintf(h, " %T:%#v", a, a)
		}
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// cachedPage is the part of an entry that answers a page: rows[from:to],
// and whether more follow.
type cachedPage struct {
	from, to  int
	truncated bool
}

// pageIn is s's page in ent, if ent holds all of it: from s's place to
// its row cap, or to the result's end.
func (s *Stmt) pageIn(ent *cacheEntry) (cachedPage, bool) {
	from := 0
	if s.paged() {
		from = s.start.place() - ent.base
	}
	if from < 0 || from > len(ent.rows) {
		return cachedPage{}, false
	}
	p := cachedPage{from: from, to: from + s.Limit}
	switch {
	case p.to < len(ent.rows):
		p.truncated = true
	case p.to == len(ent.rows):
		p.truncated = ent.res.Truncated
	case ent.res.Truncated:
		return cachedPage{}, false // the page goes past the rows held
	default:
		p.to = len(ent.rows)
	}
	return p, !s.paged() || s.follows(ent, from)
}

// follows says whether the page of s at from in ent starts where its
// cursor says: a keyset cursor's page starts after the row of its keys
// (then offset rows on), which must be the entry's row there. A result
// read again since the cursor was made may have moved.
func (s *Stmt) follows(ent *cacheEntry, from int) bool {
	if s.start.after == nil {
		return true // a place from the result's start
	}
	switch i := from - s.start.offset - 1; {
	case i >= 0:
		return sameKeys(s.start.after, keyValues(ent.rows[i], s.keys))
	case i == -1 && ent.lead != nil:
		return sameKeys(s.start.after, ent.lead)
	}
	return false
}

// keyValues are the key cells of row as a cursor holds them.
func keyValues(row []Cell, keys []sqlbuild.Key) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = cellValue(&row[k.Col])
	}
	return out
}

// sameKeys compares keys as a cursor carries them (JSON).
func sameKeys(a, b []any) bool {
	x, err := json.Marshal(a)
	if err != nil {
		return false
	}
	y, err := json.Marshal(b)
	return err == nil && bytes.Equal(x, y)
}

// get returns the live entry of key that holds what fits asks, or nil.
// fresh reads asks nothing: a miss (the run that follows counts as one).
func (c *resultCache) get(key [32]byte, now time.Time, fresh bool, fits func(*cacheEntry) bool) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok || fresh {
		c.misses.Add(1)
		return nil
	}
	ent := el.Value.(*cacheEntry)
	if now.Sub(ent.at) > c.ttl {
		c.remove(el)
		c.misses.Add(1)
		return nil
	}
	if !fits(ent) {
		c.misses.Add(1)
		return nil
	}
	c.lru.MoveToFront(el)
	c.hits.Add(1)
	return ent
}

// runCached answers s from cache when an entry holds its page, else runs
// it into t and keeps its rows (and, for a page after the first, the
// rows ahead of it) when they fit. A fresh read reads its page only: a
// caller that reads fresh will not take the pages after it from here.
func (s *Stmt) runCached(ctx context.Context, t *trackSink, cache *resultCache, at time.Time) (*Result, error) {
	key, gen := s.cacheKey(), cache.generation(s.Database)
	var page cachedPage
	if ent := cache.get(key, at, s.Fresh, func(ent *cacheEntry) (ok bool) {
		page, ok = s.pageIn(ent)
		return ok
	}); ent != nil {
		res, err := ent.replay(t, page)
		if err != nil {
			return nil, err
		}
		res.Cache = &CacheInfo{Hit: true, AgeMS: at.Sub(ent.at).Milliseconds()}
		return res, nil
	}
	run := s
	if s.paged() && s.start.place() > 0 && s.recap != nil && !s.Fresh {
		n := s.Limit + min(aheadPages*s.Limit, maxAheadRows)
		c := *s
		c.Limit, c.text = n, s.recap(n+1)
		run = &c
	}
	var rec *recordSink
	var res *Result
	err := s.e.retry(ctx, s, func(ctx context.Context) (bool, error) {
		rec = &recordSink{Sink: t, page: s.Limit, bound: min(maxCacheEntry, cache.perSub-entryOverhead)}
		var err error
		res, err = s.src.run(ctx, run, rec)
		return t.started, err
	})
	if err != nil {
		return nil, err
	}
	if !rec.off {
		ent := &cacheEntry{key: key, subject: s.g.subject, db: s.Database, at: at, cols: rec.cols, rows: rec.rows, res: *res,
			size: rec.size + entryOverhead}
		if s.paged() {
			ent.base, ent.keys = s.start.place(), s.keys
			if s.start.offset == 0 {
				ent.lead = s.start.after
			}
		}
		ent.res.Columns = slices.Clone(res.Columns)
		cache.put(ent, gen)
	}
	// What the page itself answers, of what its run read.
	res.RowCount, res.Truncated = min(rec.n, s.Limit), rec.n > s.Limit || res.Truncated
	res.Cache = &CacheInfo{}
	return res, nil
}

// put keeps ent, read when ent.db's generation was gen, making room: the
// least recently used entries go, the subject's own first when it is over
// its share. An entry read before its database's last forget is dropped.
func (c *resultCache) put(ent *cacheEntry, gen uint64) {
	if ent.size > c.perSub {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gens[ent.db] != gen {
		return
	}
	if el, ok := c.entries[ent.key]; ok {
		if j := joined(el.Value.(*cacheEntry), ent, c.ttl); j != nil && j.size <= c.perSub {
			ent = j
		}
		c.remove(el)
	}
	for el := c.lru.Back(); el != nil && c.bySub[ent.subject]+ent.size > c.perSub; {
		prev := el.Prev()
		if el.Value.(*cacheEntry).subject == ent.subject {
			c.remove(el)
			c.evictions.Add(1)
		}
		el = prev
	}
	for c.bytes+ent.size > c.maxBytes && c.lru.Len() > 0 {
		c.remove(c.lru.Back())
		c.evictions.Add(1)
	}
	c.entries[ent.key] = c.lru.PushFront(ent)
	c.bytes += ent.size
	c.bySub[ent.subject] += ent.size
}

// joined is the entries old and ent of one request as one, when the
// rows of one go on right where the other's end (for keyset pages, after
// the row the later one's run began after), old is still live, and both
// fit an entry; nil when they do not join. It is as old as its older
// part, and says what the later part's run said of the rows after it.
func joined(old, ent *cacheEntry, ttl time.Duration) *cacheEntry {
	a, b := old, ent
	if b.base+len(b.rows) == a.base {
		a, b = b, a
	}
	if a.base+len(a.rows) != b.base || !a.res.Truncated || len(a.rows) == 0 || ent.at.Sub(old.at) > ttl ||
		a.size+b.size > maxCacheEntry+entryOverhead {
		return nil
	}
	if a.keys != nil && (b.lead == nil || !sameKeys(b.lead, keyValues(a.rows[len(a.rows)-1], a.keys))) {
		return nil
	}
	j := *b
	j.key, j.subject, j.db = ent.key, ent.subject, ent.db
	j.at = old.at
	j.rows = slices.Concat(a.rows, b.rows)
	j.base, j.lead = a.base, a.lead
	j.size = a.size + b.size - entryOverhead
	return &j
}

func (c *resultCache) remove(el *list.Element) {
	ent := c.lru.Remove(el).(*cacheEntry)
	delete(c.entries, ent.key)
	c.bytes -= ent.size
	if c.bySub[ent.subject] -= ent.size; c.bySub[ent.subject] <= 0 {
		delete(c.bySub, ent.subject)
	}
}

// forget drops every entry of database db: rows arrived there.
func (c *resultCache) forget(db string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gens[db]++
	for el := c.lru.Front(); el != nil; {
		next := el.Next()
		if el.Value.(*cacheEntry).db == db {
			c.remove(el)
		}
		el = next
	}
}

// CacheStats reports the result cache; zero when it is off.
func (e *Engine) CacheStats() CacheStats {
	c := e.cache
	if c == nil {
		return CacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Entries: c.lru.Len(), Bytes: c.bytes, Hits: c.hits.Load(), Misses: c.misses.Load(),
		Evictions: c.evictions.Load(), MaxBytes: c.maxBytes, MaxSubjectBytes: c.perSub}
}

// entryOverhead is what an entry costs besides its cells.
const entryOverhead = 512

// recordSink passes the rows of a page on and keeps a copy of them while
// they fit in bound bytes (past it, or once a cell streams, it keeps
// nothing). Rows past the page (read ahead) it only keeps, and it stops
// the run (errEnough) at the first that does not fit.
type recordSink struct {
	Sink
	page  int   // rows to pass on
	bound int64 // bytes of cells to keep at most
	n     int   // rows given so far
	cols  []ResultColumn
	rows  [][]Cell
	size  int64
	off   bool
}

func (r *recordSink) Begin(cols []ResultColumn) error {
	r.cols = slices.Clone(cols)
	return r.Sink.Begin(cols)
}

func (r *recordSink) Row(cells []Cell) error {
	r.n++
	if r.n > r.page {
		if r.off || !r.keep(cells) {
			return errEnough
		}
		return nil
	}
	if !r.off && !r.keep(cells) {
		r.off, r.rows = true, nil
	}
	return r.Sink.Row(cells)
}

// keep copies cells into the record, unless one streams or they would
// take it past its bound.
func (r *recordSink) keep(cells []Cell) bool {
	size := r.size
	for _, c := range cells {
		if c.stream != nil {
			return false
		}
		size += int64(len(c.B)) + cellOverhead
	}
	if size > r.bound {
		return false
	}
	row := make([]Cell, len(cells))
	for i, c := range cells {
		row[i] = c
		row[i].B = slices.Clone(c.B)
	}
	r.rows, r.size = append(r.rows, row), size
	return true
}

// replay gives the page p of ent's rows to sink as a run would, and its
// summary.
func (ent *cacheEntry) replay(sink Sink, p cachedPage) (*Result, error) {
	if ent.cols != nil {
		if err := sink.Begin(ent.cols); err != nil {
			return nil, err
		}
	}
	for _, row := range ent.rows[p.from:p.to] {
		if err := sink.Row(row); err != nil {
			return nil, err
		}
	}
	res := ent.res
	res.Columns = slices.Clone(ent.res.Columns)
	res.RowCount, res.Truncated = p.to-p.from, p.truncated
	return &res, nil
}
