package mcp

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/blocktransport"
)

// TestResultProfile: a result in blocks comes with a profile of all its
// rows, by column, that agrees with the database's own aggregates, in the
// structured content and, shortly, in the text.
func TestResultProfile(t *testing.T) {
	store := openStore(t, blocktransport.Options{Dir: t.TempDir()})
	p, _ := newTestPlugin(t, Options{Blocks: store})
	cs := connectStreamable(t, serveHTTP(t, p).URL, "alice", "2025-11-25", nil)
	text, meta, _ := callSQL(t, cs, map[string]any{"database": "iot", "sql": "SELECT id, status, note FROM readings", "export": true})
	if len(meta.Profile) != 3 {
		t.Fatalf("got profile %+v, want one entry a column", meta.Profile)
	}
	id, status, note := meta.Profile[0], meta.Profile[1], meta.Profile[2]
	if id.Count != 5000 || id.Min != "1" || id.Max != "5000" || id.Distinct != 0 {
		t.Errorf("id: got %+v, want 5000 values from 1 to 5000, too many to count", id)
	}
	aggText, _, _ := callSQL(t, cs, map[string]any{"database": "iot",
		"sql": "SELECT status, count(*) AS n FROM readings GROUP BY status ORDER BY n DESC, status"})
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(aggText), "\n")[1:] {
		if !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}
	var got []string
	for _, v := range status.Top {
		got = append(got, fmt.Sprintf("%s,%d", v.Value, v.Count))
	}
	if status.Distinct != len(want) || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("status: got %v (%d distinct), want the database's counts %v", got, status.Distinct, want)
	}
	nullsText, _, _ := callSQL(t, cs, map[string]any{"database": "iot", "sql": "SELECT count(*) - count(note) FROM readings"})
	if nulls := strings.Split(nullsText, "\n")[1]; strconv.FormatInt(note.Nulls, 10) != nulls || note.Count+note.Nulls != 5000 {
		t.Errorf("note: got %+v, want %s NULLs of 5000", note, nulls)
	}
	if !strings.Contains(text, "# profile of all rows, by column:") || !strings.Contains(text, "#   status: 5000 values") {
		t.Errorf("got text %q, want the profile in short", text)
	}
}

// TestResultProfileAskedAway: a call whose _meta has lakegate/profile:
// false gets its result in blocks without a profile, on a server that
// profiles; the next call without it gets one.
func TestResultProfileAskedAway(t *testing.T) {
	store := openStore(t, blocktransport.Options{Dir: t.TempDir()})
	p, _ := newTestPlugin(t, Options{Blocks: store})
	cs := connectStreamable(t, serveHTTP(t, p).URL, "alice", "2025-11-25", nil)
	args := map[string]any{"database": "iot", "sql": "SELECT id, status FROM readings", "export": true}
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: args, Meta: mcpsdk.Meta{ProfileMetaKey: false}})
	if err != nil || res.IsError {
		t.Fatalf("run_sql: %v %+v", err, res)
	}
	res = followJob(t, cs, res)
	var meta ResultMeta
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcpsdk.TextContent).Text
	if meta.Profile != nil || strings.Contains(text, "# profile") || meta.Transfer == nil || meta.Transfer.Rows != 5000 {
		t.Errorf("asked away: got profile %+v, text %q, transfer %+v; want no profile and 5000 rows in blocks", meta.Profile, text, meta.Transfer)
	}
	if _, meta, _ := callSQL(t, cs, args); len(meta.Profile) != 2 {
		t.Errorf("the next call: got profile %+v, want one entry a column", meta.Profile)
	}
}

// TestResultWithoutProfile: with mcp_result_profile off a result in
// blocks comes without a profile, its rows all there.
func TestResultWithoutProfile(t *testing.T) {
	store := openStore(t, blocktransport.Options{Dir: t.TempDir()})
	p, _ := newTestPlugin(t, Options{Blocks: store, NoProfile: true})
	cs := connectStreamable(t, serveHTTP(t, p).URL, "alice", "2025-11-25", nil)
	text, meta, _ := callSQL(t, cs, map[string]any{"database": "iot", "sql": "SELECT id, status FROM readings", "export": true})
	if meta.Profile != nil || strings.Contains(text, "# profile") || meta.Transfer == nil || meta.Transfer.Rows != 5000 {
		t.Errorf("got profile %+v, text %q, transfer %+v; want no profile and 5000 rows in blocks", meta.Profile, text, meta.Transfer)
	}
}
