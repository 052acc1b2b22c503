package query

import (
	"encoding/binary"
	"unicode/utf8"
)

// Readers of PostgreSQL's binary values, and where text may be cut.

// wireReader reads a binary value; a read past its end sets bad.
type wireReader struct {
	b   []byte
	bad bool
}

func (r *wireReader) int32() int32 {
	if len(r.b) < 4 {
		r.bad, r.b = true, nil
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b))
	r.b = r.b[4:]
	return v
}

// value reads a length-prefixed value: nil for NULL (length -1).
func (r *wireReader) value() ([]byte, bool) {
	n := r.int32()
	switch {
	case r.bad:
		return nil, false
	case n == -1:
		return nil, true
	case n < 0 || int(n) > len(r.b):
		r.bad, r.b = true, nil
		return nil, false
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v, true
}

// chunkEnd is where the first piece of s at most n bytes long ends on a
// UTF-8 boundary (n itself when s is no longer).
func chunkEnd(s []byte, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for k := n; k > n-utf8.UTFMax && k > 0; k-- {
		if utf8.RuneStart(s[k]) {
			return k
		}
	}
	return n
}
