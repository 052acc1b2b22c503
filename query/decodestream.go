package query

import (
	"context"
	"errors"
)

// streamedValue is an array or record too large to hold (over sizeProbe
// on the wire) on its way to an encoder, which writes it in parts as it
// is decoded (writeTo): the server holds its wire bytes and one part,
// never its whole output. Only sinks that write parts get one (partSink);
// a sink that keeps rows gets the value decoded whole, within the row
// bound. The statement's context bounds the decoding's time.
type streamedValue struct {
	col *pgColumn
	raw []byte
}

// partSink is a Sink that writes a large cell in parts as it is decoded
// (the encoders), so that it may be given streamed values.
type partSink interface {
	Sink
	writesParts()
}

// writeTo decodes the value, handing emit its output a part at a time,
// and stops at emit's first error or when the statement's context ends.
func (v *streamedValue) writeTo(emit func([]byte) error) error {
	c := v.col
	w := c.container
	w.limit, w.depth = c.limit, 0
	if w.partAt == 0 {
		w.partAt = encChunk
	}
	w.emit = func(p []byte) error {
		if err := c.stream.Err(); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return timeoutErr(err)
			}
			return err
		}
		return emit(p)
	}
	defer func() { w.emit = nil }()
	b, err := w.appendJSON(c.scratch[:0], c.oid, v.raw)
	c.scratch = b[:0]
	if err == nil && len(b) > 0 {
		err = w.emit(b)
	}
	if errors.Is(err, errContainerTooBig) {
		return rowTooBig(c.rowMax, err)
	}
	return err
}
