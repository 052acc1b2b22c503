package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/query"
)

// Defaults of the preview Options: what the model sees of a result sent
// to blocks.
const (
	DefaultPreviewRows      = 20
	DefaultPreviewBytes     = 64 << 10
	DefaultPreviewCellBytes = 1 << 10
)

// The modes of a query tool's result (ResultMeta.Mode).
const (
	// ModeInline: every row is in the text content, as CSV.
	ModeInline = "inline"
	// ModeBlocks: the text content holds a preview; every row is in the
	// block transfer.
	ModeBlocks = "blocks"
)

// resultArgs are the arguments query and run_sql share about the size and
// destination of their result.
type resultArgs struct {
	// MaxRows caps the rows: absent is the server's default, 0 no cap.
	MaxRows *int `json:"max_rows"`
	// Export sends the whole result to blocks, whatever its size.
	Export bool `json:"export"`
	// Format of the blocks: ndjson (default) or csv.
	Format string `json:"format"`
}

// check resolves the arguments: the row cap to ask the engine for and the
// block format.
func (a resultArgs) check() (limit int, f query.Format, err error) {
	switch a.Format {
	case "", "ndjson":
		f = query.FormatNDJSON
	case "csv":
		f = query.FormatCSV
	default:
		return 0, "", &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("format %q is not supported", a.Format), Hint: "use ndjson or csv"}
	}
	switch {
	case a.MaxRows == nil && a.Export:
		// An export without a cap is the whole result.
		return query.NoLimit, f, nil
	case a.MaxRows == nil:
		return 0, f, nil
	case *a.MaxRows < 0:
		return 0, "", &lakegate.Error{Kind: lakegate.KindValidation, Message: "max_rows must not be negative", Hint: "give a row count, or 0 for no cap"}
	case *a.MaxRows == 0:
		return query.NoLimit, f, nil
	}
	return *a.MaxRows, f, nil
}

// answer is a query tool's result: every row (inline), or a preview and
// the transfer that holds them all.
type answer struct {
	*query.AutoResult
	transfer *blocktransport.Manifest
	// cellBytes is the preview cell bound, for the note on cut cells.
	cellBytes int
}

// ResultMeta is the structured content of a query tool's result: what a
// program needs to read the rows, which are in the text content (inline,
// as CSV) or in the transfer (blocks), never sent twice.
type ResultMeta struct {
	Columns    []query.ResultColumn `json:"columns"`
	RowCount   int                  `json:"row_count"`
	Truncated  bool                 `json:"truncated"`
	NextCursor string               `json:"next_cursor,omitempty"`
	// Hint says, for a truncated result, how to get the rest.
	Hint      string `json:"hint,omitempty"`
	SQL       string `json:"sql,omitempty"`
	ElapsedMS int64  `json:"elapsed_ms"`
	// Mode is ModeInline or ModeBlocks.
	Mode string `json:"mode"`
	// PreviewRows is how many leading rows the text shows (blocks).
	PreviewRows int `json:"preview_rows,omitempty"`
	// CutCells counts the preview's cells cut at the preview cell bound.
	CutCells int                      `json:"cut_cells,omitempty"`
	Transfer *blocktransport.Manifest `json:"transfer,omitempty"`
}

// result makes the tool result: the rows (or the preview) encoded once as
// CSV text for the model, a footer saying what is where, the metadata as
// structured content, and one resource link per block.
func (a *answer) result() (*mcpsdk.CallToolResult, int64, error) {
	res, err := a.render(a.cellBytes)
	return res, int64(a.RowCount), err
}

func (a *answer) render(cellBytes int) (*mcpsdk.CallToolResult, error) {
	var b strings.Builder
	b.Grow(int(a.Rows.Size()) + 256)
	enc, _ := query.NewEncoder(query.FormatCSV, &b)
	if err := enc.Begin(a.Columns); err != nil {
		return nil, err
	}
	if err := a.Rows.Replay(enc); err != nil {
		return nil, err
	}
	if err := enc.End(a.Result); err != nil {
		return nil, err
	}
	// The cells are text now: let them go before the SDK makes its copies
	// of the reply.
	preview, cut := a.Rows.Len(), a.Rows.Cut()
	a.Rows = nil
	meta := ResultMeta{Columns: a.Columns, RowCount: a.RowCount, Truncated: a.Truncated, NextCursor: a.NextCursor,
		Hint: a.Hint, SQL: a.SQL, ElapsedMS: a.ElapsedMS, Mode: ModeInline}
	if a.transfer == nil {
		fmt.Fprintf(&b, "# rows: %d", a.RowCount)
		if a.Truncated {
			b.WriteString(", truncated: " + a.Hint + "; next_cursor: " + a.NextCursor)
		}
		b.WriteByte('\n')
	} else {
		meta.Mode, meta.PreviewRows, meta.CutCells, meta.Transfer = ModeBlocks, preview, cut, a.transfer
		m := a.transfer
		fmt.Fprintf(&b, "# rows: %d (the first %d above)%s; all rows are in transfer %s: %d %s blocks, %d bytes, sha256 %s, "+
			"until %s; read them with resources/read (links below), get_result_block, or GET "+BlocksPath+"/%s/all\n",
			a.RowCount, preview, truncNote(a.Truncated), m.ID, len(m.Blocks), m.Format, m.Bytes, m.SHA256,
			m.Expires.Format(time.RFC3339), m.ID)
		if n := cut; n > 0 {
			fmt.Fprintf(&b, "# %d cells longer than %d bytes are cut above (marked …[cut: N bytes in all]); they are whole in the blocks\n",
				n, cellBytes)
		}
	}
	data, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("encode tool result: %w", err)
	}
	content := []mcpsdk.Content{&mcpsdk.TextContent{Text: b.String()}}
	if m := a.transfer; m != nil {
		for _, blk := range m.Blocks {
			content = append(content, &mcpsdk.ResourceLink{
				URI:      blockURI(m.ID, blk.N),
				Name:     fmt.Sprintf("block-%d", blk.N),
				Title:    fmt.Sprintf("Block %d of %d", blk.N+1, len(m.Blocks)),
				MIMEType: blocktransport.MIMEType(m.Format),
				Size:     &blk.Size,
			})
		}
	}
	return &mcpsdk.CallToolResult{Content: content, StructuredContent: json.RawMessage(data)}, nil
}

func truncNote(t bool) string {
	if t {
		return ", truncated at max_rows"
	}
	return ""
}

// blockSpill is where a result too large to answer inline goes: an
// encoder writing a block transfer, committed at End.
type blockSpill struct {
	query.Encoder
	w        *blocktransport.Writer
	manifest *blocktransport.Manifest
	span     trace.Span // the transfer's block write span, until ended
}

var _ query.Spill = (*blockSpill)(nil)

// endSpan ends the transfer's span once: committed as m, failed with err,
// or aborted (neither).
func (s *blockSpill) endSpan(m *blocktransport.Manifest, err error) {
	if s.span != nil {
		endBlockWrite(s.span, m, err)
		s.span = nil
	}
}

// End flushes the rows and commits the transfer.
func (s *blockSpill) End(res *query.Result) (err error) {
	defer func() { s.endSpan(s.manifest, err) }()
	if err := s.Encoder.End(res); err != nil {
		return err
	}
	cols, err := json.Marshal(res.Columns)
	if err != nil {
		return err
	}
	m, err := s.w.Commit(int64(res.RowCount), cols)
	if err != nil {
		return blockErr(err)
	}
	s.manifest = m
	return nil
}

// Abort removes the partial transfer.
func (s *blockSpill) Abort() {
	s.endSpan(nil, nil)
	s.w.Abort()
}

// blockWriter maps the store's errors into the taxonomy.
type blockWriter struct{ w *blocktransport.Writer }

var _ query.PartWriter = blockWriter{}

func (b blockWriter) Write(p []byte) (int, error) {
	n, err := b.w.Write(p)
	return n, blockErr(err)
}

func (b blockWriter) WritePart(p []byte) (int, error) {
	n, err := b.w.WritePart(p)
	return n, blockErr(err)
}
