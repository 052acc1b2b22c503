package query

import "sync"

// A bytePool keeps byte slices that grew to their working size for the
// next user: an encoder's buffer grows to about twice encFlushAt, the rows
// of an answer held until it spills grow to the answer budget, and every
// call would otherwise grow them again, by doubling, from nothing. A slice
// grown past max (a long cell) is let go.
type bytePool struct {
	pool sync.Pool
	max  int
}

// get is a slice to append to, empty, with the room an earlier user left.
func (p *bytePool) get() *[]byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// put gives b, whose bytes nothing reads any more, back to the pool.
func (p *bytePool) put(b *[]byte) {
	if cap(*b) > p.max {
		return
	}
	*b = (*b)[:0]
	p.pool.Put(b)
}
