package tools

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/query"
)

// Elicitation asks the person behind a client, and only where the client
// said at initialize that it can (its elicitation capability): a client
// that cannot is answered as always. Form mode confirms work an operator
// marks heavy (a tool declared with confirm, EXPLAIN ANALYZE, which runs
// the query) before it starts; URL mode hands a download to the person
// (run_sql's deliver "person"). Both are multi round-trip requests: the
// call answers at once with its question, holding nothing (no worker, no
// query) while the person decides, and comes back with the answer.

// canElicit reports whether the client of s asks its person in mode
// ("form" or "url"). A client declaring elicitation with neither mode can
// do forms (the capability as it was before modes).
func canElicit(s *mcpsdk.ServerSession, mode string) bool {
	if s == nil {
		return false
	}
	p := s.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	if mode == "url" {
		return e.URL != nil
	}
	return e.Form != nil || e.URL == nil
}

// confirmSchema asks for nothing but the person's yes or no.
var confirmSchema = map[string]any{"type": "object", "properties": map[string]any{}}

// The ids of lakegate's input requests (multi round-trip requests): the
// SDK sends them as elicitations to a client of a revision before
// 2026-07-28 and calls the handler again with the answers; a client of
// that revision or later answers them itself and calls again.
const (
	confirmInput  = "confirm"
	downloadInput = "download"
)

// inputRequired is the answer that asks the client for its person's
// input before the call goes on: it carries no content, and the call
// comes back with the answers (call.inputs) and state (call.state).
type inputRequired struct {
	reqs  mcpsdk.InputRequestMap
	state string
}

func (o inputRequired) result() (*mcpsdk.CallToolResult, int64, error) {
	return &mcpsdk.CallToolResult{InputRequests: o.reqs, RequestState: o.state}, 0, nil
}

// confirm asks the person behind c's client whether to go on with what
// (a sentence), where the client can ask: nil output and error to go on
// (confirmed, or a client that cannot ask), an inputRequired to ask, or
// the error that answers the call, nothing having run. The answer is
// logged.
func (ts *Set) confirm(ctx context.Context, c call, what string) (output, error) {
	if !canElicit(c.session, "form") {
		return nil, nil
	}
	res, ok := c.inputs[confirmInput].(*mcpsdk.ElicitResult)
	if !ok {
		return inputRequired{reqs: mcpsdk.InputRequestMap{confirmInput: &mcpsdk.ElicitParams{Mode: "form", Message: what, RequestedSchema: confirmSchema}}}, nil
	}
	ts.log.InfoContext(ctx, "confirmation asked", lakegate.LogTool, c.tool, lakegate.LogSubject, c.Subject, "action", res.Action)
	switch res.Action {
	case "accept":
		return nil, nil
	case "decline":
		return nil, &lakegate.Error{Kind: lakegate.KindForbidden, Message: "the person declined: nothing ran",
			Hint: "ask the person what they want instead; do not call it again unasked"}
	default:
		return nil, &lakegate.Error{Kind: lakegate.KindForbidden, Message: fmt.Sprintf("the person dismissed the question (%s): nothing ran", res.Action),
			Hint: "ask the person whether to run it"}
	}
}

// ask is what a call of t asks the person behind its client before it
// is admitted: every call of a tool declared with confirm is confirmed,
// and a handler may ask its own (toolHandler.ask). Nil output and error:
// go on. A call back with the answer to the handler's question had its
// confirmation before that question was asked.
func (ts *Set) ask(ctx context.Context, t tool, c call, args json.RawMessage) (output, error) {
	if t.confirm && (len(c.inputs) == 0 || c.inputs[confirmInput] != nil) {
		q := fmt.Sprintf("Run %s?", t.name)
		var compact bytes.Buffer
		if json.Compact(&compact, args) == nil && compact.String() != "null" && compact.Len() > 2 {
			q = fmt.Sprintf("Run %s with %s?", t.name, clip(compact.String(), 300))
		}
		if out, err := ts.confirm(ctx, c, q); out != nil || err != nil {
			return out, err
		}
	}
	if t.handler.ask == nil {
		return nil, nil
	}
	return t.handler.ask(ctx, ts, c, args)
}

// askOptions say when an export asks the person: past confirmExport
// bytes (the planner's estimate) they confirm it, past downloadExport it
// goes to them as a download. 0: never.
type askOptions struct {
	confirmExport, downloadExport int64
}

// runSQLFirst is run_sql's ask: with deliver "person", the rows go to the
// person as a download (deliver), where the client can hand one over; an
// export may ask the person first (askExport).
func runSQLFirst(ctx context.Context, ts *Set, c call, args json.RawMessage) (output, error) {
	var in sqlIn
	if err := c.args.decode(args, &in); err != nil {
		return nil, nil // a bad argument is the handler's to answer
	}
	c.keepDecoded(&in)
	switch {
	case in.Deliver == deliverPerson:
		return ts.deliver(ctx, c, in)
	case in.Export:
		return ts.askExport(ctx, c, in)
	}
	return nil, nil
}

// askExport asks about an export the planner puts past the operator's
// bounds, where the client can ask: past mcp_elicit_download_bytes the
// rows go to the person as a download link instead (a person's file does
// not belong in blocks an agent pages through); past
// mcp_confirm_export_bytes the person confirms it first. Without an
// estimate (SQLite, a planner error) nothing is asked.
func (ts *Set) askExport(ctx context.Context, c call, in sqlIn) (output, error) {
	_, lends := ts.downloads.Load().(host.Downloads)
	download := ts.asks.downloadExport > 0 && lends && canElicit(c.session, "url")
	confirm := ts.asks.confirmExport > 0 && canElicit(c.session, "form")
	in.Export, in.MaxRows, in.Format = false, nil, "" // a download has every row, as CSV
	switch {
	case download && c.inputs[downloadInput] != nil:
		return ts.deliver(ctx, c, in) // the person's answer
	case confirm && c.inputs[confirmInput] != nil:
		return ts.confirm(ctx, c, "")
	case !download && !confirm:
		return nil, nil
	}
	st, err := ts.engine.PrepareSQL(ctx, c.Caller, query.SQLRequest{Database: in.Database, SQL: in.SQL, Params: in.Params, Limit: query.NoLimit})
	if err != nil {
		return nil, nil // the handler answers it
	}
	size, ok := st.Estimate(ctx)
	switch {
	case !ok:
		return nil, nil
	case download && size > float64(ts.asks.downloadExport):
		return ts.deliver(ctx, c, in)
	case confirm && size > float64(ts.asks.confirmExport):
		return ts.confirm(ctx, c, fmt.Sprintf("Export about %s from %s? The planner expects that much: %s", humanBytes(size), in.Database, clip(in.SQL, 300)))
	}
	return nil, nil
}

// humanBytes writes n bytes as a person reads them: "3.2 GB".
func humanBytes(n float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB"}
	i := 0
	for n >= 1000 && i < len(units)-1 {
		n /= 1000
		i++
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// clip is s cut to at most n bytes at a rune boundary, marked when cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// deliverPerson is run_sql's deliver value that hands the rows to the
// person (URL mode): a link to a CSV of every row, opened in the person's
// browser, so that a download meant for a person never goes through the
// model's context.
const deliverPerson = "person"

// deliver hands every row of in's statement to the person behind c's
// client as a single-use download link (the console's tickets: no token
// in it, bound to the caller, expiring within a minute), by an
// elicitation in URL mode. Nil output and error: the client cannot open
// a link for its person (or the host lends no downloads), and the call is
// answered as always.
func (ts *Set) deliver(ctx context.Context, c call, in sqlIn) (output, error) {
	d, _ := ts.downloads.Load().(host.Downloads)
	if d == nil || !canElicit(c.session, "url") {
		return nil, nil
	}
	if in.Export || in.Cursor != "" || in.MaxRows != nil {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "a download for the person has every row: export, cursor and max_rows do not apply",
			Hint: `send database, sql and params with deliver "person"`}
	}
	if res, ok := c.inputs[downloadInput].(*mcpsdk.ElicitResult); ok {
		// The call again, with the person's answer; the state is when the
		// link expires.
		ts.log.InfoContext(ctx, "download handed to the person", lakegate.LogTool, c.tool, lakegate.LogSubject, c.Subject, "action", res.Action)
		expires, err := time.Parse(time.RFC3339, c.state)
		if err != nil {
			return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "the call's request state is not this server's"}
		}
		if res.Action != "accept" {
			return nil, &lakegate.Error{Kind: lakegate.KindForbidden, Message: fmt.Sprintf("the person did not take the download (%s)", res.Action),
				Hint: "ask the person what they want instead"}
		}
		return delivered{expires: expires}, nil
	}
	url, expires, err := d.SQLDownload(ctx, c.Caller, in.Database, in.SQL, in.Params)
	if err != nil {
		return nil, err
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	return inputRequired{state: expires.Format(time.RFC3339), reqs: mcpsdk.InputRequestMap{downloadInput: &mcpsdk.ElicitParams{
		Mode: "url", URL: url, ElicitationID: hex.EncodeToString(raw[:]),
		Message: fmt.Sprintf("Download every row of this query as CSV (a link for you alone, once, until %s UTC): %s", expires.Format(time.TimeOnly), clip(in.SQL, 300)),
	}}}, nil
}

// delivered answers a call whose rows went to the person.
type delivered struct{ expires time.Time }

func (o delivered) result() (*mcpsdk.CallToolResult, int64, error) {
	text := fmt.Sprintf("The person has a link to download every row as CSV (once, until %s UTC). No rows came through here: tell them it is theirs to open.",
		o.expires.Format(time.TimeOnly))
	return &mcpsdk.CallToolResult{
		Content:           []mcpsdk.Content{&mcpsdk.TextContent{Text: text}},
		StructuredContent: statusMeta{Columns: []query.ResultColumn{}, Mode: modePerson},
	}, 0, nil
}

// modePerson is the mode of a result handed to the person.
const modePerson = "person"
