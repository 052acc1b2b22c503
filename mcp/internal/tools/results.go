package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/mcp/internal/wire"
	"github.com/lakegate/lakegate/query"
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
	// MaxChars bounds the answer's text below the server's
	// mcp_answer_chars; absent: that setting.
	MaxChars *int `json:"max_chars"`
	// Fresh reads the rows now even when the result cache holds them.
	Fresh bool `json:"fresh"`
}

// minAnswerChars is the least max_chars a call may ask for: a header, a
// row and the footer.
const minAnswerChars = 500

// chars is the answer budget the call asks for (0: the server's).
func (a resultArgs) chars() (int, error) {
	if a.MaxChars == nil {
		return 0, nil
	}
	if *a.MaxChars < minAnswerChars {
		return 0, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("max_chars must be at least %d", minAnswerChars),
			Hint: "leave it out for the server's answer budget"}
	}
	return *a.MaxChars, nil
}

// check resolves the arguments: the row cap to ask the engine for, the
// block format and the answer budget asked for (0: the server's).
func (a resultArgs) check() (limit int, f query.Format, chars int, err error) {
	switch a.Format {
	case "", "ndjson":
		f = query.FormatNDJSON
	case "csv":
		f = query.FormatCSV
	default:
		return 0, "", 0, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("format %q is not supported", a.Format), Hint: "use ndjson or csv"}
	}
	if chars, err = a.chars(); err != nil {
		return 0, "", 0, err
	}
	switch {
	case a.MaxRows == nil && a.Export:
		// An export without a cap is the whole result.
		return query.NoLimit, f, chars, nil
	case a.MaxRows == nil:
		return 0, f, chars, nil
	case *a.MaxRows < 0:
		return 0, "", 0, &lakegate.Error{Kind: lakegate.KindValidation, Message: "max_rows must not be negative", Hint: "give a row count, or 0 for no cap"}
	case *a.MaxRows == 0:
		return query.NoLimit, f, chars, nil
	}
	return *a.MaxRows, f, chars, nil
}

// answer is a query tool's result: every row (inline), or a preview and
// the transfer that holds them all.
type answer struct {
	*query.AutoResult
	transfer *blocktransport.Manifest
	// cellBytes is the preview cell bound, for the note on cut cells.
	cellBytes int
	// chars is the answer budget: the most bytes (so characters) of text.
	chars int
	// stmt continues the result after the rows an answer cut to its
	// budget shows (nil: it cannot).
	stmt *query.Stmt
	// profile summarises the rows in the transfer.
	profile []query.ColumnProfile
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
	// AsOf and LagS say how fresh the rows are (query.Result).
	AsOf time.Time `json:"as_of"`
	LagS float64   `json:"lag_s"`
	// Mode is ModeInline or ModeBlocks.
	Mode string `json:"mode"`
	// PreviewRows is how many leading rows the text shows (blocks).
	PreviewRows int `json:"preview_rows,omitempty"`
	// CutCells counts the preview's cells cut at the preview cell bound.
	CutCells int                      `json:"cut_cells,omitempty"`
	Transfer *blocktransport.Manifest `json:"transfer,omitempty"`
	// Profile summarises every row of a result in blocks, by column, so
	// that a question about all of them needs no second query.
	Profile []query.ColumnProfile `json:"profile,omitempty"`
	// Series, for a time series: its bucket, range and gaps.
	Series *query.SeriesInfo `json:"series,omitempty"`
	// Cache, with the result cache on: whether the rows came from it,
	// and how old they are.
	Cache *query.CacheInfo `json:"cache,omitempty"`
}

// result makes the tool result: the rows (or the preview) encoded once as
// CSV text for the model, a footer saying what is where, the metadata as
// structured content, and one resource link per block.
func (a *answer) result() (*mcpsdk.CallToolResult, int64, error) {
	res, err := a.render(a.cellBytes)
	return res, int64(a.RowCount), err
}

func (a *answer) render(cellBytes int) (*mcpsdk.CallToolResult, error) {
	held := a.Rows
	a.Rows = nil // the cells become text here: let them go before the SDK copies the reply
	inline := a.transfer == nil
	meta := ResultMeta{Columns: a.Columns, RowCount: a.RowCount, Truncated: a.Truncated, NextCursor: a.NextCursor,
		Hint: a.Hint, SQL: a.SQL, ElapsedMS: a.ElapsedMS, AsOf: a.AsOf, LagS: a.LagS, Mode: ModeInline, Series: a.Series, Cache: a.Cache}
	// The footer's room: as long as it can be (every row shown), so that
	// the rows shown leave room for it. An inline answer cut to its
	// budget says more (why, and the cursor past the rows shown): its
	// rows are fitted again, leaving room for that footer.
	room := len(a.footer(held.Len(), meta, cellBytes, held.Cut()))
	text, shown := fitRows(held, a.Columns, a.chars-room-16)
	if inline && shown < held.Len() {
		room = max(room, len(a.footer(held.Len(), a.cutMeta(meta, held.Len()), cellBytes, held.Cut())))
		text, shown = fitRows(held, a.Columns, a.chars-room-16)
		meta = a.cutMeta(meta, shown)
	}
	var b strings.Builder
	b.Grow(len(text) + room)
	b.Write(text)
	b.WriteString(a.footer(shown, meta, cellBytes, held.Cut()))
	if !inline {
		meta.Mode, meta.PreviewRows, meta.CutCells, meta.Transfer, meta.Profile = ModeBlocks, shown, held.Cut(), a.transfer, a.profile
	}
	held.Release() // the rows are text now
	data, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("encode tool result: %w", err)
	}
	content := []mcpsdk.Content{&mcpsdk.TextContent{Text: b.String()}}
	if m := a.transfer; m != nil {
		// One link a block, while they fit the budget; the manifest in
		// the structured content lists every block.
		used := b.Len()
		for _, blk := range m.Blocks {
			link := &mcpsdk.ResourceLink{
				URI:      wire.BlockURI(m.ID, blk.N),
				Name:     fmt.Sprintf("block-%d", blk.N),
				Title:    fmt.Sprintf("Block %d of %d", blk.N+1, len(m.Blocks)),
				MIMEType: blocktransport.MIMEType(m.Format),
				Size:     &blk.Size,
			}
			if used += len(link.URI) + len(link.Name) + len(link.Title) + len(link.MIMEType) + 16; used > a.chars {
				break
			}
			content = append(content, link)
		}
	}
	return &mcpsdk.CallToolResult{Content: content, StructuredContent: json.RawMessage(data)}, nil
}

// cutMeta is meta of an inline answer cut to its budget after shown rows:
// the same shape as a page cut at max_rows, continued by next_cursor.
func (a *answer) cutMeta(meta ResultMeta, shown int) ResultMeta {
	meta.RowCount, meta.Truncated, meta.NextCursor, meta.Hint = shown, true, "", ""
	if a.stmt != nil {
		meta.NextCursor, meta.Hint = a.stmt.CursorAt(shown)
	}
	if meta.NextCursor == "" {
		meta.Hint = "narrow the query (filters, fewer columns) or aggregate it"
	}
	meta.Hint = budgetNote(a.chars) + "; " + meta.Hint
	return meta
}

// budgetNote says an answer was cut to its budget.
func budgetNote(chars int) string {
	return fmt.Sprintf("the answer is cut to the rows that fit in %d characters (mcp_answer_chars, or max_chars)", chars)
}

// fitRows encodes the header and the leading rows of held as CSV while
// they fit in room bytes, and says how many did. A first row that does
// not fit alone is shown with its long cells cut, so that an answer
// always moves on.
func fitRows(held *query.Buffer, cols []query.ResultColumn, room int) (text []byte, shown int) {
	text = query.AppendCSVHeader(make([]byte, 0, min(held.Size()+256, int64(max(room, 256)))), cols)
	var errFull = errors.New("full")
	_ = held.Each(func(cells []query.Cell) error {
		next := query.AppendCSVRow(text, cells)
		if len(next) > room {
			text = next[:len(text)]
			return errFull
		}
		text, shown = next, shown+1
		return nil
	})
	if shown > 0 || held.Len() == 0 {
		return text, shown
	}
	// Room for the row as held, and for a marker on each cut cell (a cell
	// just past the cut grows by its marker).
	cut := query.NewBuffer(held.Size()+int64(len(cols))*64, 1, max(64, (room-len(text))/max(1, len(cols))-32))
	_ = cut.Begin(cols)
	_ = held.Each(func(cells []query.Cell) error {
		cut.Add(cells)
		return errFull
	})
	_ = cut.Each(func(cells []query.Cell) error {
		text = query.AppendCSVRow(text, cells)
		return nil
	})
	return text, 1
}

// footer says what the text holds and where the rest is: the rows (for
// blocks, the shown rows of the preview, cut cells of which are cut).
func (a *answer) footer(shown int, meta ResultMeta, cellBytes, cut int) string {
	m := a.transfer
	if m == nil {
		f := fmt.Sprintf("# rows: %d", meta.RowCount)
		if meta.Truncated {
			f += ", truncated: " + meta.Hint + "; next_cursor: " + meta.NextCursor
		}
		return f + "\n" + seriesText(meta) + staleNote(meta)
	}
	f := fmt.Sprintf("# rows: %d (the first %d above)%s; all rows are in transfer %s: %d %s blocks, %d bytes, "+
		"until %s; read them with resources/read (links below), get_result_block, or GET "+wire.BlocksPath+"/%s/all\n",
		meta.RowCount, shown, truncNote(meta.Truncated), m.ID, len(m.Blocks), m.Format, m.Bytes,
		m.Expires.Format(time.RFC3339), m.ID)
	if cut > 0 {
		f += fmt.Sprintf("# %d cells longer than %d bytes are cut above (marked …[cut: N bytes in all]); they are whole in the blocks\n",
			cut, cellBytes)
	}
	return f + seriesText(meta) + profileText(a.profile, a.chars/4) + staleNote(meta)
}

// maxGapLines bounds the gap runs the text names (the structured content
// has those the engine kept).
const maxGapLines = 10

// seriesText says, for a time series, its buckets and its gaps: the runs
// of empty buckets of each series, where a device sent nothing.
func seriesText(meta ResultMeta) string {
	si := meta.Series
	if si == nil {
		return ""
	}
	b := si.Bucket
	n := max(b.Count, 1)
	f := fmt.Sprintf("# buckets: %d %s from %s to %s (%d per series)", n, b.Unit, si.Start.Format(time.RFC3339Nano), si.End.Format(time.RFC3339Nano), si.Buckets)
	if si.Rollup != "" {
		f += "; read from the rollup " + si.Rollup
	}
	if si.GapRuns == 0 {
		return f + "; no gaps in these rows\n"
	}
	f += fmt.Sprintf("; gaps (empty buckets) in these rows: %d runs, %d buckets", si.GapRuns, si.GapBuckets)
	for i, g := range si.Gaps {
		if i == maxGapLines {
			f += "; …"
			break
		}
		f += "; "
		for j, v := range g.Group {
			if 1+j < len(meta.Columns) {
				f += meta.Columns[1+j].Name + " "
			}
			f += fmt.Sprint(v) + " "
		}
		f += fmt.Sprintf("%s..%s (%d)", g.From.Format(time.RFC3339), g.To.Format(time.RFC3339), g.Buckets)
	}
	return f + "\n"
}

// profileText is the profile of a result in blocks as the model reads it,
// a line per column, in at most max bytes (the structured content has it
// whole): the values and NULLs counted, the least and greatest, and the
// commonest values of a column with few.
func profileText(cols []query.ColumnProfile, max int) string {
	if len(cols) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# profile of all rows, by column:\n")
	for _, c := range cols {
		line := fmt.Sprintf("#   %s: %d values", c.Name, c.Count)
		if c.Nulls > 0 {
			line += fmt.Sprintf(", %d NULL", c.Nulls)
		}
		if c.Count > 0 {
			line += fmt.Sprintf(", %s .. %s", c.Min, c.Max)
		}
		if c.Distinct > 0 {
			line += fmt.Sprintf(", %d distinct:", c.Distinct)
			for i, v := range c.Top {
				if i == 5 {
					line += " …"
					break
				}
				line += fmt.Sprintf(" %s %d", v.Value, v.Count)
			}
		}
		if b.Len()+len(line)+1 > max {
			b.WriteString("#   (the rest in structuredContent.profile)\n")
			break
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// staleNote says, for rows read from a standby more than a second behind,
// how old they are; else nothing.
func staleNote(meta ResultMeta) string {
	note := ""
	if c := meta.Cache; c != nil && c.Hit {
		note = fmt.Sprintf("# from the result cache, read %.1f s ago (ask again with fresh: true to read now)\n", float64(c.AgeMS)/1000)
	}
	if meta.LagS <= 1 {
		return note
	}
	return note + fmt.Sprintf("# as of %s: read from a standby %.0f s behind the primary\n", meta.AsOf.Format(time.RFC3339), meta.LagS)
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
	// profile summarises the columns of every row written, when
	// profiled (mcp_result_profile); Begin starts it.
	profiled bool
	profile  *query.Profile
}

// Begin starts the blocks and the profile of the columns.
func (s *blockSpill) Begin(cols []query.ResultColumn) error {
	if s.profiled {
		s.profile = query.NewProfile(cols)
	}
	return s.Encoder.Begin(cols)
}

// Row writes a row to the blocks and counts it in the profile.
func (s *blockSpill) Row(cells []query.Cell) error {
	if s.profile != nil {
		s.profile.Add(cells)
	}
	return s.Encoder.Row(cells)
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
		return wire.BlockErr(err)
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
	return n, wire.BlockErr(err)
}

func (b blockWriter) WritePart(p []byte) (int, error) {
	n, err := b.w.WritePart(p)
	return n, wire.BlockErr(err)
}
