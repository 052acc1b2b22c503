package transport

import (
	"slices"
	"time"

	"github.com/lakegate/lakegate/host"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Calling marks a tool call of session id in progress until done is
// called, once, with the bytes of its result: then it counts as finished.
func (r *Sessions) Calling(id string) (done func(bytes int64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var a *activity
	if c := r.sse[id]; c != nil {
		a = &c.act
	} else if s := r.streams[id]; s != nil {
		a = &s.act
	} else {
		return func(int64) {}
	}
	a.running++
	return func(bytes int64) {
		r.mu.Lock()
		defer r.mu.Unlock()
		a.running--
		a.calls++
		a.bytes += bytes
		a.lastCall = time.Now()
	}
}

// List describes the open SSE and Streamable HTTP sessions, oldest first.
func (r *Sessions) List() []host.SessionInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	init := make(map[string]*mcpsdk.InitializeParams, len(r.sse)+len(r.streams))
	for ss := range r.sdk() {
		init[ss.ID()] = ss.InitializeParams()
	}
	out := make([]host.SessionInfo, 0, len(r.sse)+len(r.streams))
	for id, c := range r.sse {
		si := sessionInfo(id, c.caller.Subject, "sse", &c.act, c.act.lastCall, init[id])
		si.Held, si.PeakHeld = c.out.held()
		out = append(out, si)
	}
	for id, s := range r.streams {
		out = append(out, sessionInfo(id, s.subject, "streamable", &s.act, s.lastUsed, init[id]))
	}
	slices.SortFunc(out, func(a, b host.SessionInfo) int { return a.Opened.Compare(b.Opened) })
	return out
}

func sessionInfo(id, subject, transport string, a *activity, last time.Time, init *mcpsdk.InitializeParams) host.SessionInfo {
	si := host.SessionInfo{ID: id, Subject: subject, Transport: transport, Opened: a.opened,
		LastActive: a.opened, Calls: a.calls, Running: a.running, Bytes: a.bytes}
	if last.After(si.LastActive) {
		si.LastActive = last
	}
	if init != nil {
		si.Protocol = init.ProtocolVersion
		if ci := init.ClientInfo; ci != nil {
			si.Client = ci.Name
			if ci.Version != "" {
				si.Client += " " + ci.Version
			}
		}
	}
	return si
}

// Close ends the session id, SSE or Streamable HTTP, and reports whether
// it was open. An SSE stream ends; a Streamable HTTP client's next request
// gets 404, upon which MCP clients open a new session.
func (r *Sessions) Close(id string) bool {
	r.mu.Lock()
	c := r.sse[id]
	_, stream := r.streams[id]
	if stream {
		delete(r.streams, id)
	}
	r.mu.Unlock()
	switch {
	case c != nil:
		c.Close() // unregisters itself
	case stream:
		r.closeStream(id)
	}
	return c != nil || stream
}
