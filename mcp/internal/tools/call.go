package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/jobs"
)

// One tool call as the Set runs it: the declared tool, its handler and
// output, who calls it, and the bound on the text it answers.

// tool is one declared tool as the Set runs it (see Spec.run).
type tool struct {
	name string
	// timeout is the tool's own statement timeout (zero: the engine's).
	timeout time.Duration
	args    *argsSchema
	handler toolHandler
	// confirm asks the person to confirm each call first (elicit.go).
	confirm bool
	// fresh: the tool's calls never read from the result cache.
	fresh bool
}

// A toolHandler runs one tool's calls. Its arguments are checked against
// the tool's input schema and decoded once into the handler's input type
// (typed); its output renders itself as the tool result.
type toolHandler struct {
	run func(ctx context.Context, ts *Set, c call, args json.RawMessage) (output, error)
	// args are the arguments the input type has; nil: any (a map).
	args []string
	// noWorker: the handler does no database work (it reads a job's
	// state, or waits for it), so it takes no worker slot and no share
	// of the caller's limits.
	noWorker bool
	// ask, if set, asks the person behind the client before the call is
	// admitted (elicit.go): nil output and error to go on, else the
	// call's answer (a question, or what the person's answer led to).
	ask func(ctx context.Context, ts *Set, c call, args json.RawMessage) (output, error)
}

// output is a tool's result: it renders itself as the tool result, and
// says how many rows it holds (for the Observer).
type output interface {
	result() (res *mcpsdk.CallToolResult, rows int64, err error)
}

// call is who calls a tool, the tool's own statement timeout (zero: the
// engine's) and its arguments' schema.
type call struct {
	lakegate.Caller
	timeout time.Duration
	// fresh: the call reads now, never from the result cache (the tool's
	// cache: false).
	fresh bool
	// noProfile: a result in blocks goes without its profile (the
	// call's _meta asks, wire.ProfileMetaKey: false).
	noProfile bool
	args      *argsSchema
	// decoded holds the arguments once a tool's ask has decoded them, so
	// that its handler does not decode them again.
	decoded *any
	// inline bounds the bytes of an inline answer (at most
	// mcp_block_threshold; less on a session slow to read its replies).
	inline int64
	// tool is the tool's name; watch, for a call run as a job, is given
	// the meter of its rows.
	tool  string
	watch func(jobs.Meter)
	// worker is the pool slot the call holds (nil for a tool that takes
	// none); a job that takes the call over keeps it.
	worker *worker
	// session is the client's: elicit.go asks its person. inputs and
	// state are what a call asking for input comes back with.
	session *mcpsdk.ServerSession
	inputs  mcpsdk.InputResponseMap
	state   string
	// tasks: the client takes the Tasks extension's tasks (2026-07-28):
	// a call that becomes a job answers as its task (TaskMetaKey).
	tasks bool
}

// keepDecoded keeps the decoded arguments v (a pointer to the handler's
// argument type) for the handler.
func (c call) keepDecoded(v any) {
	if c.decoded != nil {
		*c.decoded = v
	}
}

// decodedArgs are the arguments a tool's ask decoded; nil when none did.
func (c call) decodedArgs() any {
	if c.decoded == nil {
		return nil
	}
	return *c.decoded
}

// clampText cuts the text of res to chars bytes at a line end, saying so:
// no answer floods a model's context. Query answers fit already (they
// cut to their rows); this holds the others (a long table list, a wide
// table's description, a whole block) to the same bound.
func clampText(res *mcpsdk.CallToolResult, chars int) {
	used := 0
	for _, c := range res.Content {
		t, ok := c.(*mcpsdk.TextContent)
		if !ok {
			continue
		}
		if used+len(t.Text) <= chars {
			used += len(t.Text)
			continue
		}
		note := fmt.Sprintf("\n# cut: the answer is %d characters, past the %d-character answer budget (mcp_answer_chars); "+
			"ask for less of it (a narrower request, a window of rows)\n", used+len(t.Text), chars)
		keep := max(0, chars-used-len(note))
		if i := strings.LastIndexByte(t.Text[:keep], '\n'); i >= 0 {
			keep = i
		}
		for keep > 0 && !utf8.RuneStart(t.Text[keep]) {
			keep-- // no rune cut in two
		}
		t.Text = t.Text[:keep] + note
		used = chars
	}
}
