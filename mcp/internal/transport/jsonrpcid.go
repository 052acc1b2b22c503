package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/mcp/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// JSON-RPC ids go back exactly as the client wrote them. The SDK keeps a
// numeric id as an int64 that it gets through a float64, so an id past
// 2^53, a fraction or an exponent comes back changed:
// 123456789012345678901234567890 as -9223372036854775808, 1.5 as 1, 1e3 as
// 1000. Inside the server such an id is the string idAliasPrefix + its
// JSON text (an alias), and the answer carries the text again. Strings and
// integers of at most 15 digits, which the SDK keeps exactly, pass as they
// are: ordinary ids cost nothing more. A client's string id that starts
// with idAliasPrefix is aliased too (its text then is a JSON string), so
// that every alias in the server is one of ours.
//
// Where: the legacy SSE, stdio and Streamable HTTP session transports, and
// the stateless calls taken from the SDK, decode with decodeMessage and
// encode with encodeMessage. The rest of the stateless revision is the
// SDK's own handler: aliasBody rewrites the ids of a POSTed body before
// the SDK reads it, and idRestorer puts them back in what the SDK writes
// for that POST.

// idAliasPrefix starts the string id that stands in the server for a
// JSON-RPC id the SDK cannot keep exactly.
const idAliasPrefix = "lakegate-id:"

// envelopeID is how every JSON-RPC message with an id starts once encoded
// by the SDK (its wire struct: jsonrpc, then id); restoreIDs looks for it.
const envelopeID = `{"jsonrpc":"2.0","id":`

// methodCancelled is the notification whose params name a request by id.
const methodCancelled = "notifications/cancelled"

var errIDType = errors.New("invalid JSON-RPC id: want a string, a number or null")

// plainNumber reports whether raw, a JSON number, is an integer the SDK
// keeps exactly and writes back the same: at most 15 digits (below 2^53),
// no leading zero, no fraction or exponent, not -0.
func plainNumber(raw []byte) bool {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(raw) > 1) {
		return false
	}
	for _, b := range digits {
		if b < '0' || b > '9' {
			return false
		}
	}
	return true
}

// idFromRaw turns the JSON text of an id into the server's jsonrpc.ID, as
// jsonrpc.MakeID does, except that a number the SDK cannot keep exactly
// (or a string that looks like an alias) becomes an alias of its text.
// An absent or null id is the zero ID (a notification).
func idFromRaw(raw json.RawMessage) (jsonrpc.ID, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return jsonrpc.ID{}, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return jsonrpc.ID{}, err
		}
		if strings.HasPrefix(s, idAliasPrefix) {
			return jsonrpc.MakeID(idAliasPrefix + string(raw))
		}
		return jsonrpc.MakeID(s)
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		if plainNumber(raw) {
			// Exact: at most 15 digits fit a float64, and MakeID keeps
			// the number as an int64.
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil {
				return jsonrpc.ID{}, err
			}
			return jsonrpc.MakeID(float64(n))
		}
		return jsonrpc.MakeID(idAliasPrefix + string(raw))
	}
	return jsonrpc.ID{}, errIDType
}

// needsAlias reports whether the id text raw does not pass the SDK
// unchanged (see idFromRaw).
func needsAlias(raw json.RawMessage) bool {
	id, err := idFromRaw(raw)
	if err != nil {
		return false
	}
	s, ok := id.Raw().(string)
	return ok && strings.HasPrefix(s, idAliasPrefix)
}

// aliasText is the JSON text an alias stands for, or false when id is
// not an alias.
func aliasText(id jsonrpc.ID) (string, bool) {
	s, ok := id.Raw().(string)
	if !ok || !strings.HasPrefix(s, idAliasPrefix) {
		return "", false
	}
	return s[len(idAliasPrefix):], true
}

// idLogText renders an id for log lines as the client wrote it (a string
// id without its quotes).
func idLogText(id jsonrpc.ID) string {
	if text, ok := aliasText(id); ok {
		var s string
		if json.Unmarshal([]byte(text), &s) == nil {
			return s
		}
		return text
	}
	return fmt.Sprint(id.Raw())
}

// decodeMessage is jsonrpc.DecodeMessage keeping ids as sent (idFromRaw),
// in one pass over data (wire.Parse: keys match exactly, as in the SDK's
// decoder). The request id of a notifications/cancelled is aliased like
// the id it names, so that the cancellation reaches the aliased request.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	var w wire.Message
	if err := wire.Parse(data, &w, wire.Exact); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if w.Version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", w.Version, "2.0")
	}
	id, err := idFromRaw(w.ID)
	if err != nil {
		return nil, err
	}
	if w.Method != nil {
		var method string
		if err := wire.Parse(w.Method, &method, wire.Exact); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		params := w.Params
		if method == methodCancelled {
			params = aliasCancelled(params)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("invalid request: a response needs an id")
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if raw := bytes.TrimSpace(w.Error); len(raw) > 0 && string(raw) != "null" {
		var e jsonrpc.Error
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		resp.Error = &e
	}
	return resp, nil
}

// aliasCancelled returns the params of a notifications/cancelled with
// their requestId aliased when it needs one; otherwise params as they are.
func aliasCancelled(params json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || !needsAlias(p["requestId"]) {
		return params
	}
	id, _ := idFromRaw(p["requestId"])
	p["requestId"], _ = json.Marshal(id.Raw())
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// aliasBody prepares a POSTed Streamable HTTP body for the SDK: the ids
// (and cancelled request ids) the SDK cannot keep exactly are replaced by
// their aliases. It returns the body to hand on (body itself when nothing
// changed), the id of a single request as text for logs ("" for a
// notification, a batch or unreadable JSON, which the SDK then refuses),
// and whether anything was aliased, in which case the response must go
// through idRestorer.
func aliasBody(body []byte) (out []byte, logID string, aliased bool) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return body, "", false
	}
	if trimmed[0] == '[' {
		var items []json.RawMessage
		if json.Unmarshal(trimmed, &items) != nil {
			return body, "", false
		}
		for i, item := range items {
			if changed, _, ok := aliasObject(item); ok {
				items[i], aliased = changed, true
			}
		}
		if !aliased {
			return body, "", false
		}
		if out, err := json.Marshal(items); err == nil {
			return out, "", true
		}
		return body, "", false
	}
	changed, logID, ok := aliasObject(trimmed)
	if !ok {
		return body, logID, false
	}
	return changed, logID, true
}

// aliasObject is aliasBody for one message: the message rewritten (and
// true) when an id in it needed an alias, and its id for logs.
func aliasObject(msg []byte) ([]byte, string, bool) {
	var env wire.Message
	if wire.Parse(msg, &env, wire.Exact) != nil {
		return nil, "", false
	}
	id, err := idFromRaw(env.ID)
	if err != nil {
		return nil, "", false
	}
	logID := ""
	if id.IsValid() {
		logID = idLogText(id)
	}
	if _, ok := aliasText(id); !ok && (env.Params == nil || string(bytes.TrimSpace(env.Method)) != `"`+methodCancelled+`"`) {
		return nil, logID, false // the common case: nothing to alias
	}
	var w map[string]json.RawMessage
	if json.Unmarshal(msg, &w) != nil {
		return nil, "", false
	}
	changed := false
	if _, ok := aliasText(id); ok {
		w["id"], _ = json.Marshal(id.Raw())
		changed = true
	}
	if params, ok := w["params"]; ok && string(bytes.TrimSpace(w["method"])) == `"`+methodCancelled+`"` {
		if p := aliasCancelled(params); !bytes.Equal(p, params) {
			w["params"] = p
			changed = true
		}
	}
	if !changed {
		return nil, logID, false
	}
	out, err := json.Marshal(w)
	if err != nil {
		return nil, logID, false
	}
	return out, logID, true
}

// restoreIDs puts back, in encoded JSON-RPC messages, the text each
// aliased id stands for. It rewrites only an alias at the start of a
// message (envelopeID), which is where the SDK's encoder puts the id, and
// returns data itself when there is none.
func restoreIDs(data []byte) []byte {
	needle := []byte(envelopeID + `"` + idAliasPrefix)
	i := bytes.Index(data, needle)
	if i < 0 {
		return data
	}
	out := make([]byte, 0, len(data))
	for i >= 0 {
		start := i + len(envelopeID) // the alias's opening quote
		end := stringEnd(data, start)
		var alias string
		if end < 0 || json.Unmarshal(data[start:end], &alias) != nil ||
			!strings.HasPrefix(alias, idAliasPrefix) || !json.Valid([]byte(alias[len(idAliasPrefix):])) {
			// Not one of ours after all: leave it.
			out = append(out, data[:start+1]...)
			data = data[start+1:]
		} else {
			out = append(out, data[:start]...)
			out = append(out, alias[len(idAliasPrefix):]...)
			data = data[end:]
		}
		i = bytes.Index(data, needle)
	}
	return append(out, data...)
}

// stringEnd is the index just past the JSON string that starts with the
// quote at data[start], or -1.
func stringEnd(data []byte, start int) int {
	for j := start + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// idRestorer is the response writer of a Streamable HTTP POST whose ids
// aliasBody aliased: it gives the ids back as sent in what the SDK writes.
// The SDK writes each SSE event, and each JSON body, with one Write
// (writeEvent and writeJSONRPCError in go-sdk v1.8.0), so a message is
// never split across two writes here; TestJSONRPCIDRoundTrip pins that.
type idRestorer struct {
	http.ResponseWriter
}

func (w idRestorer) Write(p []byte) (int, error) {
	q := restoreIDs(p)
	if _, err := w.ResponseWriter.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteHeader drops a Content-Length: restored ids change the length.
func (w idRestorer) WriteHeader(code int) {
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (Flush,
// write deadlines).
func (w idRestorer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// decodeMessages reads one JSON-RPC message or a batch (an array of them),
// keeping ids as sent (decodeMessage).
func decodeMessages(body []byte) ([]jsonrpc.Message, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, errors.New("empty body: want one JSON-RPC message")
	}
	if body[0] != '[' {
		msg, err := decodeMessage(body)
		if err != nil {
			return nil, err
		}
		return []jsonrpc.Message{msg}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, errors.New("empty batch")
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for i, raw := range raws {
		msg, err := decodeMessage(raw)
		if err != nil {
			return nil, fmt.Errorf("batch item %d: %w", i, err)
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}
