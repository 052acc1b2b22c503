package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
)

// A window is rows offset to offset+limit of a transfer, read by rows
// rather than by block, within the answer budget: an agent pages through
// a million rows at its own pace without ever receiving a 1 MiB block.
// Blocks are read in turn (from any replica, as get_result_block does)
// and split into rows: NDJSON by line, CSV by line outside quotes, block
// 0 of a CSV transfer beginning with the header. How many rows each block
// holds is remembered per transfer (rowIndex), so a later window skips
// the blocks before it unread.

// defaultWindowRows is a window's rows when limit is not given.
const defaultWindowRows = 100

// rowIndex remembers how many rows the blocks of recent transfers hold.
// It is bounded: past maxIndexed transfers the oldest is forgotten (it
// is counted again if asked for).
type rowIndex struct {
	mu    sync.Mutex
	rows  map[string][]int // by transfer: rows of blocks 0..k
	order []string         // transfers, oldest first
}

const maxIndexed = 256

// get is the rows of block n of transfer id, if counted.
func (ix *rowIndex) get(id string, n int) (int, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	r := ix.rows[id]
	if n < len(r) {
		return r[n], true
	}
	return 0, false
}

// counted is how many blocks of transfer id are counted.
func (ix *rowIndex) counted(id string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return len(ix.rows[id])
}

// put records that block n of transfer id holds rows rows; blocks are
// counted in order.
func (ix *rowIndex) put(id string, n, rows int) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.rows == nil {
		ix.rows = map[string][]int{}
	}
	r, ok := ix.rows[id]
	if !ok {
		if len(ix.order) >= maxIndexed {
			delete(ix.rows, ix.order[0])
			ix.order = ix.order[1:]
		}
		ix.order = append(ix.order, id)
	}
	if n == len(r) {
		ix.rows[id] = append(r, rows)
	}
}

// windowText is a window's result: the rows are the text content; the
// structured content says where they are in the result.
type windowText struct {
	TransferID string `json:"transfer_id"`
	Format     string `json:"format"`
	Offset     int    `json:"offset"`
	Rows       int    `json:"rows"`
	TotalRows  int64  `json:"total_rows"`
	// Writing: the transfer is still being written (its job runs);
	// TotalRows counts the rows of the blocks sealed so far.
	Writing bool `json:"writing,omitempty"`
	// NextOffset continues after these rows; absent at the end.
	NextOffset *int `json:"next_offset,omitempty"`
	text       []byte
}

func (w *windowText) result() (*mcpsdk.CallToolResult, int64, error) {
	meta, err := json.Marshal(w)
	if err != nil {
		return nil, 0, fmt.Errorf("encode tool result: %w", err)
	}
	return &mcpsdk.CallToolResult{
		Content:           []mcpsdk.Content{&mcpsdk.TextContent{Text: string(w.text)}},
		StructuredContent: json.RawMessage(meta),
	}, int64(w.Rows), nil
}

// window reads rows offset to offset+limit of transfer id for c, as many
// as fit in chars.
func (ts *Set) window(ctx context.Context, c lakegate.Caller, id string, offset, limit, chars int) (*windowText, error) {
	if offset < 0 || limit < 1 {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "offset must be 0 or more and limit 1 or more",
			Hint: "offset counts rows from 0; limit is the rows to read"}
	}
	var (
		w      *windowText
		head   []byte // the CSV header, or the NDJSON columns line
		rows   [][]byte
		row    int // the result's index of the current block's first row
		blocks = 1
	)
	held := 0 // bytes of the rows kept: never past the budget, whatever limit asks
	for n := 0; n < blocks && len(rows) < limit && held <= chars; n++ {
		if k, ok := ts.index.get(id, n); ok && row+k <= offset && n > 0 {
			row += k
			continue
		}
		data, m, err := ts.blocks.Read(ctx, c, id, n)
		if err != nil {
			return nil, err
		}
		if w == nil {
			w = &windowText{TransferID: m.ID, Format: m.Format, Offset: offset, TotalRows: m.Rows, Writing: !m.Complete}
			blocks = len(m.Blocks)
			head = windowHead(m)
		}
		lines := splitRows(data, m.Format)
		if m.Format == "csv" && n == 0 && len(lines) > 0 {
			head, lines = append(bytes.Clone(lines[0]), '\n'), lines[1:]
		}
		ts.index.put(id, n, len(lines))
		for i, l := range lines {
			if row+i < offset {
				continue
			}
			if len(rows) == limit || held > chars {
				break
			}
			rows = append(rows, l)
			held += len(l) + 1
		}
		row += len(lines)
	}
	if w == nil {
		return nil, &lakegate.Error{Kind: lakegate.KindNotFound, Message: "no such transfer"}
	}
	// The rows that fit, leaving room for the footer.
	text := append([]byte{}, head...)
	room := chars - 200 - len(id)
	for _, r := range rows {
		if len(text)+len(r)+1 > room && w.Rows > 0 {
			break
		}
		text = append(append(text, r...), '\n')
		w.Rows++
	}
	end := offset + w.Rows
	if w.Writing {
		// What is sealed is counted; more is to come.
		w.TotalRows = int64(row)
		w.NextOffset = &end
		if w.Rows == 0 {
			text = fmt.Appendf(text, "# no rows at offset %d yet: %d written so far (transfer %s is still being written); ask again\n", offset, row, id)
		} else {
			text = fmt.Appendf(text, "# rows %d to %d of the %d written so far (transfer %s is still being written); next: offset %d\n", offset, end-1, row, id, end)
		}
		w.text = text
		return w, nil
	}
	if int64(end) < w.TotalRows {
		w.NextOffset = &end
	}
	switch {
	case w.Rows == 0:
		text = fmt.Appendf(text, "# no rows: the result has %d, from offset 0\n", w.TotalRows)
	case w.NextOffset != nil:
		text = fmt.Appendf(text, "# rows %d to %d of %d (transfer %s); next: offset %d\n", offset, end-1, w.TotalRows, id, end)
	default:
		text = fmt.Appendf(text, "# rows %d to %d of %d (transfer %s): the end\n", offset, end-1, w.TotalRows, id)
	}
	w.text = text
	return w, nil
}

// windowHead is the line that names a transfer's columns above NDJSON
// rows (a CSV transfer's header comes from block 0).
func windowHead(m *blocktransport.Manifest) []byte {
	var cols []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(m.Columns, &cols) != nil || m.Format == "csv" {
		return nil
	}
	b := []byte("# columns:")
	for i, c := range cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(b, ' '), c.Name...)
	}
	return append(b, '\n')
}

// splitRows splits a block into its rows (without their line ends):
// NDJSON by line, CSV by line end outside quotes.
func splitRows(data []byte, format string) [][]byte {
	var rows [][]byte
	quoted, start := false, 0
	for i, ch := range data {
		switch {
		case ch == '"' && format == "csv":
			quoted = !quoted
		case ch == '\n' && !quoted:
			rows = append(rows, bytes.TrimSuffix(data[start:i], []byte{'\r'}))
			start = i + 1
		}
	}
	if start < len(data) {
		rows = append(rows, data[start:])
	}
	return rows
}

// BlocksCounted is how many blocks of transfer id windows have read and
// counted the rows of (those before a later window's offset are then
// skipped unread).
func (ts *Set) BlocksCounted(id string) int { return ts.index.counted(id) }
