package query

import (
	"container/list"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
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
	rows    [][]Cell
	res     Result // the source's summary, before Run adds to it
	size    int64
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

// lookup is get, unless the read asked for fresh rows (then no lookup,
// and no miss counted twice: the run that follows counts as one).
func (c *resultCache) lookup(key [32]byte, now time.Time, fresh bool) *cacheEntry {
	if fresh {
		c.misses.Add(1)
		return nil
	}
	return c.get(key, now)
}

// cacheKey names what a statement answers for whom: the database, the
// access it runs under (the caller's access rules, PostgreSQL role and
// search path), the text it runs, its arguments and row cap.
func (s *Stmt) cacheKey() [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %t %d %q", s.Database, s.g.who, s.role, s.pinPath, s.Limit, s.text)
	for _, a := range s.args {
		fmt.Fprintf(h, " %T:%#v", a, a)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// get returns the live entry of key, or nil.
func (c *resultCache) get(key [32]byte, now time.Time) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		c.misses.Add(1)
		return nil
	}
	ent := el.Value.(*cacheEntry)
	if now.Sub(ent.at) > c.ttl {
		c.remove(el)
		c.misses.Add(1)
		return nil
	}
	c.lru.MoveToFront(el)
	c.hits.Add(1)
	return ent
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

// recordSink passes rows on and keeps a copy of them, until they pass
// maxCacheEntry or a cell streams (then nothing is kept).
type recordSink struct {
	Sink
	cols []ResultColumn
	rows [][]Cell
	size int64
	off  bool
}

func (r *recordSink) Begin(cols []ResultColumn) error {
	r.cols = slices.Clone(cols)
	return r.Sink.Begin(cols)
}

func (r *recordSink) Row(cells []Cell) error {
	if !r.off {
		row := make([]Cell, len(cells))
		for i, c := range cells {
			if c.stream != nil {
				r.off, r.rows = true, nil
				break
			}
			row[i] = c
			row[i].B = slices.Clone(c.B)
			r.size += int64(len(c.B)) + cellOverhead
		}
		if r.size > maxCacheEntry {
			r.off, r.rows = true, nil
		}
		if !r.off {
			r.rows = append(r.rows, row)
		}
	}
	return r.Sink.Row(cells)
}

// replay gives ent's rows to sink as a run would, and its summary.
func (ent *cacheEntry) replay(sink Sink) (*Result, error) {
	if ent.cols != nil {
		if err := sink.Begin(ent.cols); err != nil {
			return nil, err
		}
	}
	for _, row := range ent.rows {
		if err := sink.Row(row); err != nil {
			return nil, err
		}
	}
	res := ent.res
	res.Columns = slices.Clone(ent.res.Columns)
	return &res, nil
}
