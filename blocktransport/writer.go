package blocktransport

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
)

// Writer writes one transfer. Each Write ends at a record (row) boundary;
// a record too large for one write goes in WritePart pieces ending with a
// Write. A block is closed only between records, so every block parses
// alone. It is not safe for concurrent use.
type Writer struct {
	s     *Store
	owner string
	dir   string
	m     Manifest
	f     *os.File
	cur   int64 // bytes in the open block
	// inRecord is set while a record begun with WritePart is open.
	inRecord bool
	// crc is the CRC-32C of the open block's bytes, taken as each is
	// written.
	crc  uint32
	done bool
	err  error
}

// ID is the transfer's id.
func (w *Writer) ID() string { return w.m.ID }

// Written is the number of bytes written so far.
func (w *Writer) Written() int64 { return w.m.Bytes }

// Write appends p, which ends at a record boundary (whole records, or the
// last piece of one begun with WritePart), to the transfer, closing the
// open block first when p would take it past the block size and no record
// is open. Over a budget it fails with a *BudgetError; after any failure
// every write fails.
func (w *Writer) Write(p []byte) (int, error) { return w.write(p, false) }

// WritePart appends a piece of a record that goes on in the next write:
// no block is closed until a Write ends the record, so a record larger
// than a block makes one larger block, and every block still parses alone.
func (w *Writer) WritePart(p []byte) (int, error) { return w.write(p, true) }

func (w *Writer) write(p []byte, part bool) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.done {
		return 0, errors.New("blocktransport: write after commit or abort")
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := w.s.reserve(w.owner, w.m.Bytes, int64(len(p))); err != nil {
		w.err = err
		return 0, err
	}
	w.m.Bytes += int64(len(p))
	if w.f != nil && !w.inRecord && w.cur+int64(len(p)) > w.s.opts.BlockSize {
		if err := w.closeBlock(); err != nil {
			return 0, w.fail(err)
		}
	}
	if w.f == nil {
		f, err := os.OpenFile(w.blockPath(len(w.m.Blocks)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return 0, w.fail(err)
		}
		w.f = f
	}
	if _, err := w.f.Write(p); err != nil {
		return 0, w.fail(err)
	}
	w.cur += int64(len(p))
	w.inRecord = part
	w.crc = crc32.Update(w.crc, castagnoli, p)
	return len(p), nil
}

func (w *Writer) fail(err error) error {
	w.err = fmt.Errorf("blocktransport: write block: %w", err)
	return w.err
}

func (w *Writer) blockPath(n int) string { return filepath.Join(w.dir, strconv.Itoa(n)) }

// closeBlock finishes the open block file and records it; a block whose
// file closed cleanly is sealed: readers of the transfer being written see
// it.
func (w *Writer) closeBlock() error {
	err := w.f.Close()
	w.f = nil
	b := Block{N: len(w.m.Blocks), Size: w.cur, CRC32C: crcHex(w.crc)}
	w.m.Blocks = append(w.m.Blocks, b)
	w.cur, w.crc = 0, 0
	w.s.sealed(w.m.ID, b, err == nil)
	return err
}

// Commit closes the last block and makes the transfer readable until its
// TTL. rows and columns are recorded in the manifest as given.
func (w *Writer) Commit(rows int64, columns json.RawMessage) (*Manifest, error) {
	if w.err != nil {
		w.Abort()
		return nil, w.err
	}
	if w.done {
		return nil, errors.New("blocktransport: commit after commit or abort")
	}
	if w.f != nil {
		if err := w.closeBlock(); err != nil {
			w.Abort()
			return nil, w.fail(err)
		}
	}
	w.done = true
	w.m.Rows = rows
	w.m.Columns = columns
	w.m.Expires = w.m.Created.Add(w.s.opts.TTL)
	w.m.Complete = true
	s := w.s
	s.mu.Lock()
	s.pending--
	delete(s.writing, w.m.ID)
	if s.closed {
		s.releaseLocked(w.owner, w.m.Bytes)
		s.mu.Unlock()
		_ = os.RemoveAll(w.dir)
		return nil, ErrClosed
	}
	s.transfers[w.m.ID] = &transfer{owner: w.owner, dir: w.dir, manifest: w.m}
	s.stats.Created++
	s.stats.Written += w.m.Bytes
	s.changedLocked()
	s.mu.Unlock()
	m := w.m
	return &m, nil
}

// Abort deletes the partial transfer and gives its bytes back to the
// budgets. It is safe to call after Commit (it does nothing then) and more
// than once.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
	_ = os.RemoveAll(w.dir)
	s := w.s
	s.mu.Lock()
	s.pending--
	delete(s.writing, w.m.ID)
	s.releaseLocked(w.owner, w.m.Bytes) // Bytes grows only after a reserve
	s.stats.Aborted++
	s.changedLocked()
	s.mu.Unlock()
}
