package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/query"
)

// previewRows is how many leading rows a result sent to blocks shows.
const previewRows = 20

// blockEngine is what results sent to blocks need of the engine beyond
// Engine; *query.Engine has it.
type blockEngine interface {
	Stream(ctx context.Context, c query.Caller, r query.SQLRequest, f query.Format, w io.Writer) (*query.Result, error)
	StreamQuery(ctx context.Context, c query.Caller, r query.Request, f query.Format, w io.Writer) (*query.Result, error)
	EstimateSQL(ctx context.Context, c query.Caller, r query.SQLRequest, limit int) (float64, bool)
	EstimateQuery(ctx context.Context, c query.Caller, r query.Request, limit int) (float64, bool)
}

var _ blockEngine = (*query.Engine)(nil)

// BlockResult is a tool result sent to the block store: the leading rows,
// the row count and the manifest of the transfer holding every row.
type BlockResult struct {
	Columns   []query.ResultColumn `json:"columns"`
	Rows      [][]any              `json:"rows"`
	RowCount  int                  `json:"row_count"`
	Truncated bool                 `json:"truncated"`
	SQL       string               `json:"sql,omitempty"`
	// Mode is "blocks".
	Mode      string                   `json:"mode"`
	Transfer  *blocktransport.Manifest `json:"transfer"`
	ElapsedMS int64                    `json:"elapsed_ms"`
}

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

// refuseLimit refuses the argument "limit", which query and run_sql
// called max_rows before results could go to blocks.
func refuseLimit(args json.RawMessage) error {
	var probe struct {
		Limit *int `json:"limit"`
	}
	if json.Unmarshal(args, &probe) == nil && probe.Limit != nil {
		return &query.Error{Kind: query.KindValidation, Message: `argument "limit" is now "max_rows"`,
			Hint: "max_rows: rows to return; 0 for no cap (large results come back as blocks)"}
	}
	return nil
}

// check resolves the arguments: the row cap to ask for (0: the engine's
// default), whether to stream, and the block format.
func (a resultArgs) check(batchRows int) (limit int, stream bool, f query.Format, err error) {
	switch a.Format {
	case "", "ndjson":
		f = query.FormatNDJSON
	case "csv":
		f = query.FormatCSV
	default:
		return 0, false, "", &query.Error{Kind: query.KindValidation, Message: fmt.Sprintf("format %q is not supported", a.Format), Hint: "use ndjson or csv"}
	}
	switch {
	case a.MaxRows == nil:
		// An export without a cap is the whole result.
		return 0, a.Export, f, nil
	case *a.MaxRows < 0:
		return 0, false, "", &query.Error{Kind: query.KindValidation, Message: "max_rows must not be negative", Hint: "give a row count, or 0 for no cap"}
	case *a.MaxRows == 0 || *a.MaxRows > batchRows:
		return *a.MaxRows, true, f, nil
	}
	return *a.MaxRows, a.Export, f, nil
}

// toBlocks runs a streamed query into the block store. The rows are
// encoded as they come and held in memory while they fit under the block
// threshold; past it they continue into a transfer without re-running the
// query. A result that stays under it comes back inline (as a
// *query.Result) unless export is set. estimate is the planner's size,
// asked first: a result far over the threshold goes straight to blocks.
func (p *Plugin) toBlocks(ctx context.Context, c query.Caller, f query.Format, export bool,
	estimate func() (float64, bool), run func(ctx context.Context, w io.Writer) (*query.Result, error)) (any, error) {
	sp := &spill{p: p, owner: c.Subject, format: f, threshold: p.opts.BlockThreshold}
	if export {
		sp.direct = true
	} else if est, ok := estimate(); ok && est > 2*float64(p.opts.BlockThreshold) {
		sp.direct = true
	}
	// The tap keeps the rows of a possible inline answer (up to the
	// threshold) unless the NDJSON buffer already holds them; else only
	// the preview.
	tap := &query.Tap{KeepRows: previewRows, KeepBytes: p.opts.BlockThreshold}
	if !export && (sp.direct || f != query.FormatNDJSON) {
		tap.KeepRows = math.MaxInt
	}
	reportTap(ctx, tap)
	res, err := run(query.WithTap(ctx, tap), sp)
	if err != nil {
		sp.abort()
		return nil, err
	}
	kept, all := tap.Kept()
	if !export && sp.w == nil && !sp.direct && f == query.FormatNDJSON {
		if kept, err = ndjsonRows(sp.buf); err != nil {
			return nil, err
		}
		all = true
	}
	if !export && all {
		// Under the threshold after all (a high estimate was wrong): inline.
		sp.abort()
		res.Rows, res.Mode, res.Bytes = kept, query.ModeBatch, 0
		return res, nil
	}
	return p.commitBlocks(sp, res, kept)
}

// commitBlocks finishes the transfer of sp and describes it.
func (p *Plugin) commitBlocks(sp *spill, res *query.Result, kept [][]any) (*BlockResult, error) {
	if err := sp.toStore(); err != nil {
		sp.abort()
		return nil, err
	}
	cols, _ := json.Marshal(res.Columns)
	m, err := sp.w.Commit(int64(res.RowCount), cols)
	if err != nil {
		return nil, blockErr(err)
	}
	return &BlockResult{Columns: res.Columns, Rows: kept[:min(len(kept), previewRows)], RowCount: res.RowCount,
		Truncated: res.Truncated, SQL: res.SQL, Mode: "blocks", Transfer: m, ElapsedMS: res.ElapsedMS}, nil
}

// batchToBlocks sends a batch result whose JSON passed the threshold to
// the block store.
func (p *Plugin) batchToBlocks(c query.Caller, res *query.Result, f query.Format) (*BlockResult, error) {
	sp := &spill{p: p, owner: c.Subject, format: f, direct: true}
	if err := query.EncodeRows(res, f, sp); err != nil {
		sp.abort()
		return nil, blockErr(err)
	}
	return p.commitBlocks(sp, res, res.Rows)
}

// spill is the writer of a streamed result: it keeps the encoded bytes in
// memory up to the threshold, then moves them into a block transfer and
// writes through to it. Each Write holds whole rows (the encoders flush
// at row boundaries), and the bounds of the buffered writes are kept so
// that blocks still end on a row.
type spill struct {
	p         *Plugin
	owner     string
	format    query.Format
	threshold int64
	direct    bool // write to the store from the first byte

	buf    []byte
	bounds []int // end offsets of the buffered writes
	w      *blocktransport.Writer
}

func (s *spill) Write(b []byte) (int, error) {
	if s.w == nil && (s.direct || int64(len(s.buf)+len(b)) > s.threshold) {
		if err := s.toStore(); err != nil {
			return 0, err
		}
	}
	if s.w != nil {
		n, err := s.w.Write(b)
		return n, blockErr(err)
	}
	s.buf = append(s.buf, b...)
	s.bounds = append(s.bounds, len(s.buf))
	return len(b), nil
}

// toStore starts the transfer and moves the buffered writes into it.
func (s *spill) toStore() error {
	if s.w != nil {
		return nil
	}
	if s.p.opts.Blocks == nil {
		return &query.Error{Kind: query.KindValidation,
			Message: fmt.Sprintf("the result is over %d bytes and this server has no block store", s.p.opts.BlockThreshold),
			Hint:    "ask for fewer rows (max_rows) or columns"}
	}
	w, err := s.p.opts.Blocks.Create(s.owner, string(s.format))
	if err != nil {
		return blockErr(err)
	}
	s.w = w
	start := 0
	for _, end := range s.bounds {
		if _, err := w.Write(s.buf[start:end]); err != nil {
			return blockErr(err)
		}
		start = end
	}
	s.buf, s.bounds = nil, nil
	return nil
}

// abort removes a partial transfer.
func (s *spill) abort() {
	if s.w != nil {
		s.w.Abort()
	}
}

// ndjsonRows parses NDJSON rows (one JSON array per line).
func ndjsonRows(data []byte) ([][]any, error) {
	rows := make([][]any, 0, bytes.Count(data, []byte{'\n'}))
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		var cells []json.RawMessage
		if err := json.Unmarshal(line, &cells); err != nil {
			return nil, fmt.Errorf("read back result row: %w", err)
		}
		row := make([]any, len(cells))
		for i, c := range cells {
			row[i] = query.JSONValue(c)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// blockErr maps the block store's errors into the taxonomy.
func blockErr(err error) error {
	var be *blocktransport.BudgetError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &be) && be.Whole:
		return &query.Error{Kind: query.KindValidation, Message: "the result is larger than the block budget of " + strconv.FormatInt(be.Limit, 10) + " bytes",
			Hint: "ask for fewer rows (max_rows) or columns", Err: err}
	case errors.As(err, &be) && be.Owner:
		return &query.Error{Kind: query.KindRateLimited, Message: "your stored results would pass their budget of " + strconv.FormatInt(be.Limit, 10) + " bytes",
			Hint: "ask for fewer rows, or wait for earlier transfers to expire", RetryAfter: be.RetryAfter, Err: err}
	case errors.As(err, &be):
		return &query.Error{Kind: query.KindUnavailable, Message: "the server's block store is full", Hint: "try again later", RetryAfter: 30 * time.Second, Err: err}
	case errors.Is(err, blocktransport.ErrNotFound):
		return &query.Error{Kind: query.KindNotFound, Message: "no such transfer",
			Hint: "transfers expire after a while and can be read only by the subject that made them", Err: err}
	case errors.Is(err, blocktransport.ErrNoBlock):
		return &query.Error{Kind: query.KindNotFound, Message: "no such block", Hint: "blocks are numbered from 0; see the manifest", Err: err}
	case errors.Is(err, blocktransport.ErrClosed):
		return &query.Error{Kind: query.KindUnavailable, Message: "server is shutting down", Err: err}
	}
	var ce *blocktransport.ChecksumError
	if errors.As(err, &ce) {
		return &query.Error{Kind: query.KindInternal, Message: "a block of this transfer is damaged on the server (" + err.Error() + ")",
			Hint: "run the query again", Err: err}
	}
	var qe *query.Error
	if errors.As(err, &qe) {
		return err
	}
	return fmt.Errorf("block store: %w", err)
}

// transfer returns the manifest of transfer id if c may read it: its owner
// or an admin. Others are told it does not exist.
func (p *Plugin) transfer(c query.Caller, id string) (*blocktransport.Manifest, error) {
	if p.opts.Blocks == nil {
		return nil, blockErr(blocktransport.ErrNotFound)
	}
	m, owner, err := p.opts.Blocks.Lookup(id)
	if err != nil {
		return nil, blockErr(err)
	}
	if owner != c.Subject && !c.HasRole("admin") {
		return nil, blockErr(blocktransport.ErrNotFound)
	}
	return m, nil
}

// Block resources: lakegate://transfers/{id}/blocks/{n}.
const blockTemplate = "lakegate://transfers/{id}/blocks/{n}"

func blockURI(id string, n int) string {
	return "lakegate://transfers/" + url.PathEscape(id) + "/blocks/" + strconv.Itoa(n)
}

// parseBlockURI reads lakegate://transfers/{id}/blocks/{n}.
func parseBlockURI(uri string) (id string, n int, ok bool) {
	rest, found := strings.CutPrefix(uri, "lakegate://transfers/")
	if !found {
		return "", 0, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[1] != "blocks" {
		return "", 0, false
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return parts[0], n, true
}

func (p *Plugin) addBlockResources() {
	p.server.AddResourceTemplate(&mcpsdk.ResourceTemplate{
		URITemplate: blockTemplate,
		Name:        "result-block",
		Title:       "Result block",
		Description: "One block of a large query result (NDJSON or CSV rows), listed in the result's manifest.",
	}, p.readBlock)
}

func (p *Plugin) readBlock(ctx context.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
	uri := req.Params.URI
	id, n, ok := parseBlockURI(uri)
	if !ok {
		return nil, mcpsdk.ResourceNotFoundError(uri)
	}
	caller, _ := query.CallerFrom(ctx)
	data, m, err := p.blockData(caller, id, n)
	if err != nil {
		return nil, resourceErr("read", uri, err)
	}
	return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{
		{URI: uri, MIMEType: blocktransport.MIMEType(m.Format), Text: string(data)},
	}}, nil
}

// blockData reads block n of a transfer c may read, checking its SHA-256.
func (p *Plugin) blockData(c query.Caller, id string, n int) ([]byte, *blocktransport.Manifest, error) {
	m, err := p.transfer(c, id)
	if err != nil {
		return nil, nil, err
	}
	data, _, err := p.opts.Blocks.ReadBlock(id, n)
	if err != nil {
		return nil, nil, blockErr(err)
	}
	return data, m, nil
}

// getResultBlock is the get_result_block tool, for clients that cannot
// read resources.
func getResultBlock(_ context.Context, p *Plugin, c query.Caller, args json.RawMessage) (any, error) {
	var in struct {
		TransferID string `json:"transfer_id"`
		Block      *int   `json:"block"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	if err := required("transfer_id", in.TransferID); err != nil {
		return nil, err
	}
	if in.Block == nil {
		return nil, &query.Error{Kind: query.KindValidation, Message: `argument "block" is required`, Hint: "blocks are numbered from 0"}
	}
	data, m, err := p.blockData(c, in.TransferID, *in.Block)
	if err != nil {
		return nil, err
	}
	b := m.Blocks[*in.Block]
	return &blockText{TransferID: m.ID, Block: b.N, Blocks: len(m.Blocks), Format: m.Format, Size: b.Size, SHA256: b.SHA256, data: data}, nil
}

// blockText is get_result_block's result: the block's rows are the text
// content; the structured content describes it.
type blockText struct {
	TransferID string `json:"transfer_id"`
	Block      int    `json:"block"`
	Blocks     int    `json:"blocks"`
	Format     string `json:"format"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	data       []byte
}

// blockContent renders a BlockResult for the model: the preview as CSV,
// a footer on where the rest is, and one resource link per block.
func blockContent(r *BlockResult) []mcpsdk.Content {
	preview := (&query.Result{Columns: r.Columns, Rows: r.Rows, RowCount: len(r.Rows)}).Text()
	preview = preview[:strings.LastIndex(strings.TrimSuffix(preview, "\n"), "\n")+1]
	m := r.Transfer
	text := fmt.Sprintf("%s# rows: %d (the first %d above)%s; all rows are in transfer %s: %d %s blocks, %d bytes, sha256 %s, "+
		"until %s; read them with resources/read (links below), get_result_block, or GET /mcp/blocks/%s/all\n",
		preview, r.RowCount, len(r.Rows), truncNote(r.Truncated), m.ID, len(m.Blocks), m.Format, m.Bytes, m.SHA256,
		m.Expires.Format(time.RFC3339), m.ID)
	content := []mcpsdk.Content{&mcpsdk.TextContent{Text: text}}
	for _, b := range m.Blocks {
		content = append(content, &mcpsdk.ResourceLink{
			URI:      blockURI(m.ID, b.N),
			Name:     fmt.Sprintf("block-%d", b.N),
			Title:    fmt.Sprintf("Block %d of %d", b.N+1, len(m.Blocks)),
			MIMEType: blocktransport.MIMEType(m.Format),
			Size:     &b.Size,
		})
	}
	return content
}

func truncNote(t bool) string {
	if t {
		return ", truncated at max_rows"
	}
	return ""
}

// HTTP: GET /mcp/blocks/{id} (manifest), /mcp/blocks/{id}/{n} (one block,
// ETag and Range) and /mcp/blocks/{id}/all (everything, chunked).

func (p *Plugin) serveManifest(c *gin.Context) {
	caller, _ := query.CallerFrom(c.Request.Context())
	m, err := p.transfer(caller, c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	blocktransport.ServeManifest(c.Writer, m)
}

func (p *Plugin) serveBlock(c *gin.Context) {
	caller, _ := query.CallerFrom(c.Request.Context())
	id := c.Param("id")
	if _, err := p.transfer(caller, id); err != nil {
		fail(c, err)
		return
	}
	if c.Param("n") == "all" {
		if err := p.opts.Blocks.ServeAll(c.Writer, c.Request, id); err != nil {
			fail(c, blockErr(err))
		}
		return
	}
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 0 {
		fail(c, &query.Error{Kind: query.KindValidation, Message: fmt.Sprintf("block %q is not a block number", c.Param("n")),
			Hint: "use 0 to blocks-1, or all"})
		return
	}
	if err := p.opts.Blocks.ServeBlock(c.Writer, c.Request, id, n); err != nil {
		fail(c, blockErr(err))
	}
}

// mountBlocks adds the block routes to the MCP group.
func (p *Plugin) mountBlocks(g gin.IRouter) {
	g.GET("/blocks/:id", p.serveManifest)
	g.GET("/blocks/:id/:n", p.serveBlock)
	g.HEAD("/blocks/:id/:n", p.serveBlock)
}
