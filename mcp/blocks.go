package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/host"
)

// errBlockStorage marks a failure of the block spool itself; such calls are
// logged at ERROR for the operator.
var errBlockStorage = errors.New("block storage failed")

// blockErr maps the block store's errors into the taxonomy.
func blockErr(err error) error {
	var be *blocktransport.BudgetError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &be) && be.Whole:
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: "the result is larger than the block budget of " + strconv.FormatInt(be.Limit, 10) + " bytes",
			Hint: "ask for fewer rows (max_rows) or columns", Err: err}
	case errors.As(err, &be) && be.Owner:
		return &lakegate.Error{Kind: lakegate.KindRateLimited, Message: "your stored results would pass their budget of " + strconv.FormatInt(be.Limit, 10) + " bytes",
			Hint: "ask for fewer rows, or wait for earlier transfers to expire", RetryAfter: be.RetryAfter, Err: err}
	case errors.As(err, &be):
		return &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the server's block store is full", Hint: "try again later", RetryAfter: 30 * time.Second, Err: err}
	case errors.Is(err, blocktransport.ErrNotFound):
		return &lakegate.Error{Kind: lakegate.KindNotFound, Message: "no such transfer",
			Hint: "transfers expire after a while and can be read only by the subject that made them", Err: err}
	case errors.Is(err, blocktransport.ErrNoBlock):
		return &lakegate.Error{Kind: lakegate.KindNotFound, Message: "no such block", Hint: "blocks are numbered from 0; see the manifest", Err: err}
	case errors.Is(err, blocktransport.ErrClosed):
		return &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "server is shutting down", Err: err}
	}
	var ce *blocktransport.ChecksumError
	if errors.As(err, &ce) {
		return &lakegate.Error{Kind: lakegate.KindInternal, Message: "a block of this transfer is damaged on the server (" + err.Error() + ")",
			Hint: "run the query again", Err: err}
	}
	var qe *lakegate.Error
	if errors.As(err, &qe) {
		return err
	}
	// Anything else is the spool failing (disk full, directory gone or
	// not writable): the server's trouble, not the caller's.
	return &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "block storage is full or not writable",
		Hint: "try again later, or ask for fewer rows (max_rows)", RetryAfter: 30 * time.Second,
		Err: fmt.Errorf("%w: %w", errBlockStorage, err)}
}

// transfer returns the manifest of transfer id if c may read it: its owner
// or an admin. Others are told it does not exist.
func (p *Plugin) transfer(c lakegate.Caller, id string) (*blocktransport.Manifest, error) {
	if p.opts.Blocks == nil {
		return nil, blockErr(blocktransport.ErrNotFound)
	}
	m, owner, err := p.opts.Blocks.Lookup(id)
	if err != nil {
		return nil, blockErr(err)
	}
	if owner != c.Subject && !c.HasRole(lakegate.RoleAdmin) {
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
	// Admitted by the bytes its reply can take, as a tool call is; the
	// inline bound stands for the block (1 MiB by default), whose size is
	// known only once read. The reply takes its actual size once queued.
	if _, err := p.admitReply(ctx, req.Session, req.GetExtra(), p.opts.BlockThreshold, p.opts.BlockThreshold); err != nil {
		return nil, admitErr(err)
	}
	caller, _ := lakegate.CallerFrom(ctx)
	data, m, err := p.blockData(ctx, caller, id, n)
	if err != nil {
		return nil, resourceErr("read", uri, err)
	}
	return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{
		{URI: uri, MIMEType: blocktransport.MIMEType(m.Format), Text: string(data)},
	}}, nil
}

// blockData reads block n of a transfer c may read, checking its SHA-256.
func (p *Plugin) blockData(ctx context.Context, c lakegate.Caller, id string, n int) (data []byte, m *blocktransport.Manifest, err error) {
	span := startBlockRead(ctx, id, n)
	defer func() { endBlockRead(span, int64(len(data)), err) }()
	if p.opts.Peers != nil && !strings.HasPrefix(id, p.opts.Peers.Prefix()) {
		return p.remoteBlock(ctx, c, id, n)
	}
	m, err = p.transfer(c, id)
	if err != nil {
		return nil, nil, err
	}
	data, _, err = p.opts.Blocks.ReadBlock(id, n)
	if err != nil {
		return nil, nil, blockErr(err)
	}
	return data, m, nil
}

// getResultBlock is the get_result_block tool, for clients that cannot
// read resources.
type blockIn struct {
	TransferID string `json:"transfer_id"`
	Block      int    `json:"block"`
}

func getResultBlock(ctx context.Context, p *Plugin, c call, in blockIn) (*blockText, error) {
	data, m, err := p.blockData(ctx, c.Caller, in.TransferID, in.Block)
	if err != nil {
		return nil, err
	}
	b := m.Blocks[in.Block]
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

// result is the block's rows as text, its description as structured
// content.
func (b *blockText) result(*Plugin) (*mcpsdk.CallToolResult, int64, error) {
	meta, err := json.Marshal(b)
	if err != nil {
		return nil, 0, fmt.Errorf("encode tool result: %w", err)
	}
	return &mcpsdk.CallToolResult{
		Content:           []mcpsdk.Content{&mcpsdk.TextContent{Text: string(b.data)}},
		StructuredContent: json.RawMessage(meta),
	}, 0, nil
}

// HTTP: GET /mcp/blocks/{id} (manifest), /mcp/blocks/{id}/{n} (one block,
// ETag and Range) and /mcp/blocks/{id}/all (everything, chunked).

func (p *Plugin) serveManifest(c *gin.Context) {
	if p.forward(c, c.Param("id")) {
		return // a transfer of another replica
	}
	if !p.metered(c) {
		return
	}
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	m, err := p.transfer(caller, c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	blocktransport.ServeManifest(c.Writer, m)
}

func (p *Plugin) serveBlock(c *gin.Context) {
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	id := c.Param("id")
	if p.forward(c, id) {
		return // a transfer of another replica
	}
	if _, err := p.transfer(caller, id); err != nil {
		fail(c, err)
		return
	}
	if c.Param("n") == "all" {
		if !p.metered(c) {
			return
		}
		err := serveRead(c, id, -1, func() error { return p.opts.Blocks.ServeAll(c.Writer, c.Request, id) })
		if err != nil {
			fail(c, blockErr(err))
		}
		return
	}
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 0 {
		fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("block %q is not a block number", c.Param("n")),
			Hint: "use 0 to blocks-1, or all"})
		return
	}
	err = serveRead(c, id, n, func() error { return p.opts.Blocks.ServeBlock(c.Writer, c.Request, id, n) })
	if err != nil {
		fail(c, blockErr(err))
	}
}

// metered runs the host's rate limit (Mount's meter) for this request and
// reports whether it may go on.
func (p *Plugin) metered(c *gin.Context) bool {
	if p.meter != nil {
		p.meter(c)
	}
	return !c.IsAborted()
}

// BlocksPath is where Mount serves the block transport's routes on its
// router: a transfer's manifest at BlocksPath/ID, its blocks at
// BlocksPath/ID/N and BlocksPath/ID/all (blocktransport.Client's BaseURL
// is the server's URL and this).
const BlocksPath = "/mcp/blocks"

// mountBlocks adds the block routes to the MCP group.
func (p *Plugin) mountBlocks(g gin.IRouter) {
	g.GET("/blocks/:id", p.serveManifest)
	g.GET("/blocks/:id/:n", p.serveBlock)
	g.HEAD("/blocks/:id/:n", p.serveBlock)
}

// Transfers lists the committed block transfers c may read: its own, or
// every one for an admin.
func (p *Plugin) Transfers(c lakegate.Caller) []host.TransferInfo {
	if p.opts.Blocks == nil {
		return []host.TransferInfo{}
	}
	owner := c.Subject
	if c.HasRole(lakegate.RoleAdmin) {
		owner = ""
	}
	list := p.opts.Blocks.List(owner)
	out := make([]host.TransferInfo, len(list))
	for i, t := range list {
		out[i] = host.TransferInfo(t)
	}
	return out
}

// DeleteTransfer deletes transfer id for its owner or an admin; others
// are told it does not exist.
func (p *Plugin) DeleteTransfer(c lakegate.Caller, id string) error {
	if _, err := p.transfer(c, id); err != nil {
		return err
	}
	return blockErr(p.opts.Blocks.Delete(id))
}

// ServeTransfer writes transfer id whole, its blocks in order, as the
// /mcp/blocks/{id}/all route does, for its owner or an admin. An error
// before the first byte is the caller's to render.
func (p *Plugin) ServeTransfer(w http.ResponseWriter, r *http.Request, c lakegate.Caller, id string) error {
	if _, err := p.transfer(c, id); err != nil {
		return err
	}
	return blockErr(p.opts.Blocks.ServeAll(w, r, id))
}

// remoteBlock reads block n of a transfer another replica of the cluster
// holds, on c's behalf (host.Peers.Fetch): its manifest, then the
// block, checked against the manifest's SHA-256. The owner checks that c
// may read it.
func (p *Plugin) remoteBlock(ctx context.Context, c lakegate.Caller, id string, n int) ([]byte, *blocktransport.Manifest, error) {
	var m blocktransport.Manifest
	if _, err := p.fetch(ctx, c, id, BlocksPath+"/"+id, maxManifestBytes, &m); err != nil {
		return nil, nil, err
	}
	if n < 0 || n >= len(m.Blocks) {
		return nil, nil, blockErr(blocktransport.ErrNoBlock)
	}
	data, err := p.fetch(ctx, c, id, BlocksPath+"/"+id+"/"+strconv.Itoa(n), m.Blocks[n].Size, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := blocktransport.Verify(data, m.Blocks[n].SHA256); err != nil {
		return nil, nil, blockErr(err)
	}
	return data, &m, nil
}

// maxManifestBytes bounds a manifest read from another replica.
const maxManifestBytes = 16 << 20

// fetch GETs path from the replica that owns id and returns its body (at
// most limit bytes), or decodes it into v when v is not nil. An error
// answer is returned as the owner's error.
func (p *Plugin) fetch(ctx context.Context, c lakegate.Caller, id, path string, limit int64, v any) ([]byte, error) {
	resp, err := p.opts.Peers.Fetch(ctx, c, id, path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return nil, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "reading the block from the replica that holds it failed", RetryAfter: time.Second, Err: err}
	case resp.StatusCode != http.StatusOK:
		var e struct{ Error lakegate.ErrorBody }
		if json.Unmarshal(body, &e) == nil && e.Error.Kind != "" {
			return nil, &lakegate.Error{Kind: e.Error.Kind, Message: e.Error.Message, Hint: e.Error.Hint,
				RetryAfter: time.Duration(e.Error.RetryAfter * float64(time.Second))}
		}
		return nil, lakegate.Errorf(lakegate.KindUnavailable, "the replica that holds the transfer answered %d", resp.StatusCode)
	case int64(len(body)) > limit:
		return nil, lakegate.Errorf(lakegate.KindInternal, "the replica that holds the transfer sent more than %d bytes", limit)
	case v != nil:
		return nil, json.Unmarshal(body, v)
	}
	return body, nil
}
