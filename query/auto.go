package query

import (
	"context"
	"sync/atomic"
)

// The modes of AutoResult.Mode: what happened to the rows.
const (
	// ModeInline: every row is in AutoResult.Rows.
	ModeInline = "inline"
	// ModeSpill: the rows went to the Spill; AutoResult.Rows is a preview.
	ModeSpill = "spill"
)

// Spill is where Auto sends a result too large to answer inline (for the
// MCP plugin, an encoder writing a block transfer). Auto calls Begin, Row
// and End like any Sink, or Abort instead of End.
type Spill interface {
	Sink
	// Abort drops what was written. It is called instead of End when the
	// run fails or the result is answered inline after all, and is safe
	// after a failed End.
	Abort()
	// Written is the number of bytes written so far.
	Written() int64
}

// estimateRows is the row cap above which Auto asks the planner first:
// under it the rows held are bounded by the cap as well as by
// InlineBytes, and a plan is not worth its round trips (an EXPLAIN in a
// transaction of its own) on every new statement.
const estimateRows = 10_000

// AutoOptions tune Stmt.Auto. InlineBytes and Open are required.
type AutoOptions struct {
	// InlineBytes bounds the cells held in memory for an inline answer;
	// a result past it goes to the Spill.
	InlineBytes int64
	// PreviewRows, PreviewBytes and PreviewCellBytes bound the preview kept
	// of a spilled result: its first rows, in all at most PreviewBytes,
	// each cell cut at PreviewCellBytes (see Buffer).
	PreviewRows      int
	PreviewBytes     int64
	PreviewCellBytes int
	// Always spills, whatever the size (an export).
	Always bool
	// Open makes the Spill; it is called at most once per Auto.
	Open func() (Spill, error)
	// Progress, if set, counts the rows and bytes as they go.
	Progress *Progress
}

// AutoResult is the outcome of Stmt.Auto.
type AutoResult struct {
	*Result
	// Mode is ModeInline or ModeSpill.
	Mode string
	// Rows holds every row (ModeInline) or the preview (ModeSpill).
	Rows *Buffer
}

// Progress counts a running result's rows and bytes; safe to read from
// another goroutine while Auto runs.
type Progress struct{ rows, bytes atomic.Int64 }

// Rows is the number of rows so far.
func (p *Progress) Rows() int64 { return p.rows.Load() }

// Bytes is the number of bytes held or written so far.
func (p *Progress) Bytes() int64 { return p.bytes.Load() }

// Auto runs s and decides where its rows go; it is the one place that
// chooses between an inline answer and a spill. Rows are held in memory
// while they fit under InlineBytes; past it the held rows are replayed
// into the Spill (encoded there once), the rest follow them, and only a
// preview is kept. When the planner estimates the result past InlineBytes
// (asked only for a row cap over estimateRows), or Always is set, the
// rows go to the Spill from the first, with only
// the preview held; if the estimate was wrong and the whole result fits
// the preview uncut, it is answered inline after all (not with Always).
// Memory is bounded by InlineBytes (or PreviewBytes) plus one row.
func (s *Stmt) Auto(ctx context.Context, o AutoOptions) (*AutoResult, error) {
	a := &autoSink{o: o}
	if o.Always {
		a.direct = true
	} else if s.Limit > estimateRows {
		if est, ok := s.Estimate(ctx); ok && est > float64(o.InlineBytes) {
			a.direct = true
		}
	}
	if a.direct {
		a.preview = a.newPreview()
	} else {
		a.held = NewBuffer(o.InlineBytes, 0, 0).pooled()
	}
	res, err := s.Run(ctx, a)
	if err != nil {
		if a.spill != nil {
			a.spill.Abort()
		}
		return nil, err
	}
	if a.spill == nil {
		return &AutoResult{Result: res, Mode: ModeInline, Rows: a.held}, nil
	}
	if a.inlineAfterAll {
		return &AutoResult{Result: res, Mode: ModeInline, Rows: a.preview}, nil
	}
	return &AutoResult{Result: res, Mode: ModeSpill, Rows: a.preview}, nil
}

// autoSink is the Sink of Stmt.Auto.
type autoSink struct {
	o      AutoOptions
	direct bool
	cols   []ResultColumn

	held           *Buffer // the inline answer, until it spills
	preview        *Buffer // once it spills
	previewDone    bool    // a row did not fit: no later row is kept
	spill          Spill
	inlineAfterAll bool
}

func (a *autoSink) newPreview() *Buffer {
	return NewBuffer(a.o.PreviewBytes, a.o.PreviewRows, a.o.PreviewCellBytes)
}

func (a *autoSink) Begin(cols []ResultColumn) error {
	a.cols = cols
	if a.held != nil {
		_ = a.held.Begin(cols)
	}
	if a.preview != nil {
		_ = a.preview.Begin(cols)
	}
	if a.direct {
		return a.open()
	}
	return nil
}

func (a *autoSink) open() error {
	sp, err := a.o.Open()
	if err != nil {
		return err
	}
	a.spill = sp
	return sp.Begin(a.cols)
}

func (a *autoSink) Row(cells []Cell) error {
	if p := a.o.Progress; p != nil {
		defer p.rows.Add(1)
	}
	if a.spill == nil {
		if a.held.Add(cells) {
			a.progress(a.held.Size())
			return nil
		}
		if err := a.spillHeld(); err != nil {
			return err
		}
	}
	if !a.previewDone && !a.preview.Add(cells) {
		a.previewDone = true
	}
	if err := a.spill.Row(cells); err != nil {
		return err
	}
	a.progress(a.spill.Written())
	return nil
}

func (a *autoSink) progress(n int64) {
	if a.o.Progress != nil {
		a.o.Progress.bytes.Store(n)
	}
}

// spillHeld opens the Spill, replays the held rows into it and keeps
// their preview; the held rows are then let go.
func (a *autoSink) spillHeld() error {
	if err := a.open(); err != nil {
		return err
	}
	a.preview = a.newPreview()
	_ = a.preview.Begin(a.cols)
	err := a.held.Each(func(cells []Cell) error {
		if !a.previewDone && !a.preview.Add(cells) {
			a.previewDone = true
		}
		return a.spill.Row(cells)
	})
	a.held.Release() // each row is encoded, and the preview holds its own copies
	a.held = nil
	return err
}

func (a *autoSink) End(res *Result) error {
	if a.spill == nil {
		return nil
	}
	if !a.o.Always && !a.previewDone && a.preview.Cut() == 0 {
		// The estimate was wrong: every row is in the preview.
		a.spill.Abort()
		a.inlineAfterAll = true
		return nil
	}
	return a.spill.End(res)
}
