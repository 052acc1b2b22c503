package jobs

import "sync/atomic"

// Meter is what a running job has done so far, read when its status is
// asked (a query's Progress is one). Safe for concurrent use.
type Meter interface {
	Rows() int64
	Bytes() int64
}

// TransferMeter is a Meter that also names the block transfer the job
// writes, once it has one: its sealed blocks are readable while the job
// runs (Status.Transfer).
type TransferMeter interface {
	Meter
	Transfer() string
}

// Progress is a Meter its owner sets.
type Progress struct {
	rows, bytes atomic.Int64
}

// Set records rows and bytes done.
func (p *Progress) Set(rows, bytes int64) {
	p.rows.Store(rows)
	p.bytes.Store(bytes)
}

// Rows is the rows set.
func (p *Progress) Rows() int64 { return p.rows.Load() }

// Bytes is the bytes set.
func (p *Progress) Bytes() int64 { return p.bytes.Load() }
