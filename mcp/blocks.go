package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/mcp/internal/route"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// blockRoutes serves the block transfers that results too large to
// answer inline go to: the HTTP routes under BlocksPath, the block
// resources (resources/read), the host's views of transfers (list,
// delete, serve whole), and in a cluster the forwarding of another
// replica's transfers to it. With no store every transfer is not found.
// The store is the host's: blockRoutes never closes it.
type blockRoutes struct {
	store *blocktransport.Store // nil: no block store
	peers host.Peers            // nil: a single server
	// replies admits a resources/read of a block by the bytes its reply
	// takes on its session; threshold stands for a block's size then.
	replies   replyAdmitter
	threshold int64
	// meter is the host's per-request rate limit, from Mount; nil: none.
	meter gin.HandlerFunc
}

// replyAdmitter reserves, before a request runs, the bytes its reply may
// take on the session it came on (transport.Sessions.AdmitReply).
type replyAdmitter interface {
	AdmitReply(ctx context.Context, ss *mcpsdk.ServerSession, ex *mcpsdk.RequestExtra, want, least int64) (int64, error)
}

// Create starts a block transfer for owner in format.
func (b *blockRoutes) Create(owner, format string) (*blocktransport.Writer, error) {
	if b.store == nil {
		return nil, wire.ErrNoBlockStore
	}
	w, err := b.store.Create(owner, format)
	return w, wire.BlockErr(err)
}

// status is what Status reports of the block store; nil without one.
func (b *blockRoutes) status() *host.BlockStatus {
	if b.store == nil {
		return nil
	}
	bs := b.store.Stats()
	return &host.BlockStatus{Transfers: bs.Created, Blocks: bs.Blocks, Bytes: bs.Written,
		StoredNow: bs.Transfers, StoredBytesNow: bs.Bytes}
}

// transfer returns the manifest of transfer id if c may read it: its owner
// or an admin. Others are told it does not exist.
func (b *blockRoutes) transfer(c lakegate.Caller, id string) (*blocktransport.Manifest, error) {
	if b.store == nil {
		return nil, wire.BlockErr(blocktransport.ErrNotFound)
	}
	m, owner, err := b.store.Lookup(id)
	if err != nil {
		return nil, wire.BlockErr(err)
	}
	if owner != c.Subject && !c.HasRole(lakegate.RoleAdmin) {
		return nil, wire.BlockErr(blocktransport.ErrNotFound)
	}
	return m, nil
}

// register adds the block resource template to server.
func (b *blockRoutes) register(server *mcpsdk.Server) {
	server.AddResourceTemplate(&mcpsdk.ResourceTemplate{
		URITemplate: wire.BlockTemplate,
		Name:        "result-block",
		Title:       "Result block",
		Description: "One block of a large query result (NDJSON or CSV rows), listed in the result's manifest.",
	}, b.readResource)
}

// readResource answers resources/read of a block.
func (b *blockRoutes) readResource(ctx context.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
	uri := req.Params.URI
	id, n, ok := wire.ParseBlockURI(uri)
	if !ok {
		return nil, mcpsdk.ResourceNotFoundError(uri)
	}
	// Admitted by the bytes its reply can take, as a tool call is; the
	// inline bound stands for the block (1 MiB by default), whose size is
	// known only once read. The reply takes its actual size once queued.
	if _, err := b.replies.AdmitReply(ctx, req.Session, req.GetExtra(), b.threshold, b.threshold); err != nil {
		return nil, wire.AdmitErr(err)
	}
	caller, _ := lakegate.CallerFrom(ctx)
	data, m, err := b.Read(ctx, caller, id, n)
	if err != nil {
		return nil, wire.ResourceErr("read", uri, err)
	}
	return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{
		{URI: uri, MIMEType: blocktransport.MIMEType(m.Format), Text: string(data)},
	}}, nil
}

// Read reads block n of a transfer c may read, here or on the replica
// that holds it, checking its SHA-256.
func (b *blockRoutes) Read(ctx context.Context, c lakegate.Caller, id string, n int) (data []byte, m *blocktransport.Manifest, err error) {
	span := startBlockRead(ctx, id, n)
	defer func() { endBlockRead(span, int64(len(data)), err) }()
	if b.peers != nil && !strings.HasPrefix(id, b.peers.Prefix()) {
		return b.remote(ctx, c, id, n)
	}
	m, err = b.transfer(c, id)
	if err != nil {
		return nil, nil, err
	}
	data, _, err = b.store.ReadBlock(id, n)
	if err != nil {
		return nil, nil, wire.BlockErr(err)
	}
	return data, m, nil
}

// HTTP: GET /mcp/blocks/{id} (manifest), /mcp/blocks/{id}/{n} (one block,
// ETag and Range) and /mcp/blocks/{id}/all (everything, chunked).

func (b *blockRoutes) serveManifest(c *gin.Context) {
	if route.Forward(b.peers, c, c.Param("id")) {
		return // a transfer of another replica
	}
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	m, err := b.transfer(caller, c.Param("id"))
	// Following a transfer (after: the blocks known) is part of reading
	// its blocks, which take no token when it brings news: only the first
	// look at a manifest takes one, and a follow that learns nothing new
	// (a poll) does.
	follow := err == nil && c.Query("after") != ""
	if !follow && !b.metered(c) {
		return
	}
	if follow && !m.Complete {
		// A follower: the manifest once it has more than after blocks.
		after, aerr := strconv.Atoi(c.Query("after"))
		wait, werr := strconv.Atoi(c.DefaultQuery("wait_ms", "0"))
		if aerr != nil || werr != nil || after < 0 || wait < 0 {
			route.Fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: "after and wait_ms are counts",
				Hint: fmt.Sprintf("?after=<blocks known>&wait_ms=<at most %d>", blocktransport.MaxAwait.Milliseconds())})
			return
		}
		m, _, err = b.store.Await(c.Request.Context(), c.Param("id"), after, time.Duration(wait)*time.Millisecond)
		if err == nil && !m.Complete && len(m.Blocks) <= after && !b.metered(c) {
			return
		}
		err = wire.BlockErr(err)
	}
	if err != nil {
		route.Fail(c, err)
		return
	}
	blocktransport.ServeManifest(c.Writer, m)
}

func (b *blockRoutes) serveBlock(c *gin.Context) {
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	id := c.Param("id")
	if route.Forward(b.peers, c, id) {
		return // a transfer of another replica
	}
	if _, err := b.transfer(caller, id); err != nil {
		route.Fail(c, err)
		return
	}
	if c.Param("n") == "all" {
		if !b.metered(c) {
			return
		}
		err := serveRead(c, id, -1, func() error { return b.store.ServeAll(c.Writer, c.Request, id) })
		if err != nil {
			route.Fail(c, wire.BlockErr(err))
		}
		return
	}
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 0 {
		route.Fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("block %q is not a block number", c.Param("n")),
			Hint: "use 0 to blocks-1, or all"})
		return
	}
	c.Writer = &sendfileWriter{ResponseWriter: c.Writer}
	err = serveRead(c, id, n, func() error { return b.store.ServeBlock(c.Writer, c.Request, id, n) })
	if err != nil {
		route.Fail(c, wire.BlockErr(err))
	}
}

// sendfileWriter lets net/http send a block's file with sendfile, the
// kernel copying it from the page cache to the socket: gin's writer has no
// ReadFrom, so the copy would read the file into a buffer and write it
// again. What it sends counts in Size, for the access log and the span.
type sendfileWriter struct {
	gin.ResponseWriter
	sent int64
}

func (w *sendfileWriter) ReadFrom(r io.Reader) (int64, error) {
	u, ok := w.ResponseWriter.(interface{ Unwrap() http.ResponseWriter })
	if !ok {
		return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
	}
	rf, ok := u.Unwrap().(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
	}
	w.WriteHeaderNow()
	n, err := rf.ReadFrom(r)
	w.sent += n
	return n, err
}

func (w *sendfileWriter) Size() int {
	if w.sent == 0 {
		return w.ResponseWriter.Size()
	}
	return max(w.ResponseWriter.Size(), 0) + int(w.sent)
}

func (w *sendfileWriter) Written() bool { return w.sent > 0 || w.ResponseWriter.Written() }

// metered runs the host's rate limit (Mount's meter) for this request and
// reports whether it may go on.
func (b *blockRoutes) metered(c *gin.Context) bool {
	if b.meter != nil {
		b.meter(c)
	}
	return !c.IsAborted()
}

// BlocksPath is where Mount serves the block transport's routes on its
// router: a transfer's manifest at BlocksPath/ID, its blocks at
// BlocksPath/ID/N and BlocksPath/ID/all (blocktransport.Client's BaseURL
// is the server's URL and this).
const BlocksPath = wire.BlocksPath

// ProfileMetaKey, set to false in a tools/call's _meta, asks for a result
// in blocks without its profile (see [wire.ProfileMetaKey]).
const ProfileMetaKey = wire.ProfileMetaKey

// mount adds the block routes to the MCP group; meter is the host's
// rate limit for the routes that are requests of their own.
func (b *blockRoutes) mount(g gin.IRouter, meter gin.HandlerFunc) {
	b.meter = meter
	g.GET("/blocks/:id", b.serveManifest)
	g.GET("/blocks/:id/:n", b.serveBlock)
	g.HEAD("/blocks/:id/:n", b.serveBlock)
}

// list lists the committed block transfers c may read: its own, or
// every one for an admin.
func (b *blockRoutes) list(c lakegate.Caller) []host.TransferInfo {
	if b.store == nil {
		return []host.TransferInfo{}
	}
	owner := c.Subject
	if c.HasRole(lakegate.RoleAdmin) {
		owner = ""
	}
	list := b.store.List(owner)
	out := make([]host.TransferInfo, len(list))
	for i, t := range list {
		out[i] = host.TransferInfo(t)
	}
	return out
}

// delete deletes transfer id for its owner or an admin; others are told
// it does not exist.
func (b *blockRoutes) delete(c lakegate.Caller, id string) error {
	if _, err := b.transfer(c, id); err != nil {
		return err
	}
	return wire.BlockErr(b.store.Delete(id))
}

// serveAll writes transfer id whole, its blocks in order, as the
// /mcp/blocks/{id}/all route does, for its owner or an admin. An error
// before the first byte is the caller's to render.
func (b *blockRoutes) serveAll(w http.ResponseWriter, r *http.Request, c lakegate.Caller, id string) error {
	if _, err := b.transfer(c, id); err != nil {
		return err
	}
	return wire.BlockErr(b.store.ServeAll(w, r, id))
}

// remote reads block n of a transfer another replica of the cluster
// holds, on c's behalf (host.Peers.Send): its manifest, then the
// block, checked against the manifest's CRC-32C. The owner checks that c
// may read it.
func (b *blockRoutes) remote(ctx context.Context, c lakegate.Caller, id string, n int) ([]byte, *blocktransport.Manifest, error) {
	var m blocktransport.Manifest
	if _, err := b.fetch(ctx, c, id, BlocksPath+"/"+id, maxManifestBytes, &m); err != nil {
		return nil, nil, err
	}
	if n < 0 || n >= len(m.Blocks) {
		return nil, nil, wire.BlockErr(blocktransport.ErrNoBlock)
	}
	data, err := b.fetch(ctx, c, id, BlocksPath+"/"+id+"/"+strconv.Itoa(n), m.Blocks[n].Size, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := blocktransport.Verify(data, m.Blocks[n]); err != nil {
		return nil, nil, wire.BlockErr(err)
	}
	return data, &m, nil
}

// maxManifestBytes bounds a manifest read from another replica.
const maxManifestBytes = 16 << 20

// fetch GETs path from the replica that owns id and returns its body (at
// most limit bytes), or decodes it into v when v is not nil. An error
// answer is returned as the owner's error.
func (b *blockRoutes) fetch(ctx context.Context, c lakegate.Caller, id, path string, limit int64, v any) ([]byte, error) {
	return b.send(ctx, c, http.MethodGet, id, path, limit, v)
}

// send is fetch with another method than GET.
func (b *blockRoutes) send(ctx context.Context, c lakegate.Caller, method, id, path string, limit int64, v any) ([]byte, error) {
	resp, err := b.peers.Send(ctx, c, method, id, path)
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
