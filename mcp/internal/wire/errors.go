package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
)

// The plugin's errors, rendered for each edge from the one taxonomy
// (lakegate.Error): failed tool results (ErrorResult), JSON-RPC errors
// (AdmitErr, ResourceErr), and the block store's errors mapped into the
// taxonomy (BlockErr). HTTP answers are package route's.

// ErrorResult is the one rendering of a failed call: the error body of
// the taxonomy as text, with isError set.
func ErrorResult(err error) *mcpsdk.CallToolResult {
	text, _ := json.Marshal(map[string]lakegate.ErrorBody{"error": lakegate.NewErrorBody(err)})
	return &mcpsdk.CallToolResult{
		IsError: true,
		Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: string(text)}},
	}
}

// ErrBlockStorage marks a failure of the block spool itself; such calls are
// logged at ERROR for the operator.
var ErrBlockStorage = errors.New("block storage failed")

// ErrNoBlockStore is the answer of a block transfer's start on a server
// without a block store.
var ErrNoBlockStore = errors.New("no block store")

// ErrNoJobs is the answer about a job on a server that runs none (it has
// no block store).
var ErrNoJobs = &lakegate.Error{Kind: lakegate.KindNotFound, Message: "this server runs no jobs",
	Hint: "exports answer when their rows are written"}

// BlockErr maps the block store's errors into the taxonomy.
func BlockErr(err error) error {
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
	case errors.Is(err, blocktransport.ErrNotSealed):
		return &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "that block is not written yet: the transfer is still being written",
			Hint: "read the blocks its manifest lists, and ask again for the rest", RetryAfter: time.Second, Err: err}
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
		Err: fmt.Errorf("%w: %w", ErrBlockStorage, err)}
}

// AdmitErr is a refused admission (a session's reply budget) as a
// JSON-RPC error, for requests that answer no tool result: its data is the
// taxonomy's error body, retry_after included.
func AdmitErr(err error) error {
	body := lakegate.NewErrorBody(err)
	data, _ := json.Marshal(body)
	return &jsonrpc.Error{Code: codeServerError, Message: body.Message, Data: data}
}

// codeServerError is JSON-RPC's first implementation-defined server
// error code (jsonrpc exports only the codes the specification reserves).
const codeServerError = -32000

// ResourceErr answers a failed resources/read: not_found as the protocol's
// resource-not-found error, anything else with the taxonomy's message
// and its hint (what to do instead).
func ResourceErr(what, uri string, err error) error {
	if lakegate.KindOf(err) == lakegate.KindNotFound {
		return mcpsdk.ResourceNotFoundError(uri)
	}
	b := lakegate.NewErrorBody(err)
	if b.Hint != "" {
		return fmt.Errorf("%s %s: %s (%s)", what, uri, b.Message, b.Hint)
	}
	return fmt.Errorf("%s %s: %s", what, uri, b.Message)
}

// Excerpt bounds a caller's name quoted back in a message.
func Excerpt(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && cut < len(s) && s[cut]&0xc0 == 0x80 { // not mid-rune
		cut--
	}
	return s[:cut] + "..."
}
