package mcp

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/jobs"
	"github.com/lakegate/lakegate/query"
)

// callSQL runs run_sql and returns the text content, the structured
// content and the resource links.
func callSQL(t *testing.T, cs *mcpsdk.ClientSession, args map[string]any) (string, ResultMeta, []*mcpsdk.ResourceLink) {
	t.Helper()
	ctx, cancel := contextWithTimeout(t, 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("run_sql %v: %s", args, res.Content[0].(*mcpsdk.TextContent).Text)
	}
	if args["export"] == true {
		res = followJob(t, cs, res)
	}
	var meta ResultMeta
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	var links []*mcpsdk.ResourceLink
	for _, c := range res.Content[1:] {
		links = append(links, c.(*mcpsdk.ResourceLink))
	}
	return res.Content[0].(*mcpsdk.TextContent).Text, meta, links
}

// followJob follows the job an export answered with (its status must
// say how to) to its end with job_status, and returns the done job's
// answer: the export's.
func followJob(t *testing.T, cs *mcpsdk.ClientSession, res *mcpsdk.CallToolResult) *mcpsdk.CallToolResult {
	t.Helper()
	var started struct {
		Mode string
		Job  struct {
			ID    string `json:"job_id"`
			State string
		}
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &started); err != nil || started.Job.State == "done" {
		return res // done already as it answered (a small export)
	}
	if started.Mode != "job" || started.Job.State != "running" || !strings.Contains(res.Content[0].(*mcpsdk.TextContent).Text, "job_status") {
		t.Fatalf("an export: got %s (%s), want a running job and how to follow it", raw, res.Content[0].(*mcpsdk.TextContent).Text)
	}
	for {
		st, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "job_status", Arguments: map[string]any{"job_id": started.Job.ID, "wait_s": 25}})
		if err != nil || st.IsError {
			t.Fatalf("job_status: %v %v", st, err)
		}
		var now struct{ Job struct{ State string } }
		raw, _ := json.Marshal(st.StructuredContent)
		_ = json.Unmarshal(raw, &now)
		switch now.Job.State {
		case "running":
			continue
		case "done":
			return st
		}
		t.Fatalf("the export job ended %s: %s", now.Job.State, st.Content[0].(*mcpsdk.TextContent).Text)
	}
}

// TestResultsInlineAndBlocks: a result under the threshold is answered
// inline, every row once as CSV text and none in the structured content;
// past it the rows go to blocks and the reply holds a preview bounded in
// rows, bytes and cell length, with a marker on each cut cell.
func TestResultsInlineAndBlocks(t *testing.T) {
	store := openStore(t, blocktransport.Options{Dir: t.TempDir(), BlockSize: 16 << 10})
	p, _ := newTestPlugin(t, Options{Blocks: store, BlockThreshold: 8 << 10,
		PreviewRows: 5, PreviewBytes: 2 << 10, PreviewCellBytes: 100})
	srv := serveHTTP(t, p)
	cs := connectStreamable(t, srv.URL, "alice", "2025-11-25", nil)

	t.Run("inline", func(t *testing.T) {
		text, meta, links := callSQL(t, cs, map[string]any{"database": "iot", "sql": "SELECT id, name FROM devices ORDER BY id", "max_rows": 3})
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		if len(lines) != 5 || lines[0] != "id,name" || !strings.HasPrefix(lines[1], "1,") ||
			!strings.HasPrefix(lines[4], "# rows: 3, truncated: more rows exist: pass next_cursor as cursor") ||
			!strings.Contains(lines[4], "; next_cursor: "+meta.NextCursor) || meta.NextCursor == "" || meta.Hint == "" {
			t.Errorf("got text %q, want a header, 3 rows and the footer", text)
		}
		if meta.Mode != ModeInline || meta.RowCount != 3 || !meta.Truncated || meta.Transfer != nil || len(links) != 0 {
			t.Errorf("got %+v and %d links, want inline, 3 rows, truncated, no transfer", meta, len(links))
		}
	})

	t.Run("past the threshold to blocks", func(t *testing.T) {
		text, meta, links := callSQL(t, cs, map[string]any{"database": "iot", "sql": "SELECT * FROM readings ORDER BY id", "max_rows": 0})
		if meta.Mode != ModeBlocks || meta.RowCount != 5000 || meta.Transfer == nil {
			t.Fatalf("got %+v, want 5000 rows in blocks", meta)
		}
		if meta.PreviewRows < 1 || meta.PreviewRows > 5 {
			t.Errorf("got a preview of %d rows, want 1 to 5", meta.PreviewRows)
		}
		if len(links) != len(meta.Transfer.Blocks) || len(links) < 2 {
			t.Errorf("got %d links for %d blocks", len(links), len(meta.Transfer.Blocks))
		}
		if len(text) > 4<<10 {
			t.Errorf("got %d bytes of text, want the preview bounded", len(text))
		}
		var all bytes.Buffer
		for n := range meta.Transfer.Blocks {
			data, _, err := store.ReadBlock(meta.Transfer.ID, n)
			if err != nil {
				t.Fatal(err)
			}
			all.Write(data)
		}
		rows := strings.Split(strings.TrimSuffix(all.String(), "\n"), "\n")
		if len(rows) != 5000 || !strings.HasPrefix(rows[0], "[1,") || !strings.HasPrefix(rows[4999], "[5000,") {
			t.Errorf("got %d NDJSON rows in the blocks (first %q), want 5000 in order", len(rows), rows[0])
		}
	})

	t.Run("long cells cut in the preview, whole in the blocks", func(t *testing.T) {
		sql := "SELECT id, printf('%.3000c', 'x') || 'END' AS big FROM devices ORDER BY id"
		text, meta, _ := callSQL(t, cs, map[string]any{"database": "iot", "sql": sql, "max_rows": 0})
		if meta.Mode != ModeBlocks || meta.RowCount != 50 {
			t.Fatalf("got %+v, want 50 rows in blocks", meta)
		}
		marker := query.CutMarker(3003)
		if n := strings.Count(text, marker); n == 0 || n != meta.CutCells || n != meta.PreviewRows {
			t.Errorf("got %d markers %q, cut_cells %d, preview rows %d; want one per preview row", n, marker, meta.CutCells, meta.PreviewRows)
		}
		if strings.Contains(text, "END") {
			t.Error("the preview holds a whole long cell")
		}
		data, _, err := store.ReadBlock(meta.Transfer.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte(strings.Repeat("x", 3000)+"END")) {
			t.Error("the blocks do not hold the whole cell")
		}
	})

	t.Run("a wrong guess costs nothing: export of a small result", func(t *testing.T) {
		_, meta, _ := callSQL(t, cs, map[string]any{"database": "iot", "sql": "SELECT id FROM devices WHERE id <= 2", "export": true})
		if meta.Mode != ModeBlocks || meta.RowCount != 2 || meta.Transfer == nil || meta.Transfer.Rows != 2 {
			t.Errorf("got %+v, want an export of 2 rows in blocks", meta)
		}
	})
}

// TestResultsBlockStorageFailure: when the spool cannot be written (here
// its directory is gone), a result for blocks is unavailable, naming the
// storage, and the call is logged at ERROR for the operator.
func TestResultsBlockStorageFailure(t *testing.T) {
	dir := t.TempDir() + "/spool"
	store := openStore(t, blocktransport.Options{Dir: dir})
	var logs testutil.Buffer
	p, _ := newTestPlugin(t, Options{Blocks: store, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	srv := serveHTTP(t, p)
	cs := connectStreamable(t, srv.URL, "alice", "2025-11-25", nil)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := contextWithTimeout(t, 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{
		"database": "iot", "sql": "SELECT id FROM devices", "export": true}})
	if err != nil || res.IsError {
		t.Fatal(res, err)
	}
	// The export runs as a job, which fails.
	var job struct{ Job jobs.Status }
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &job)
	st, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "job_status", Arguments: map[string]any{"job_id": job.Job.ID, "wait_s": 25}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = json.Marshal(st.StructuredContent)
	_ = json.Unmarshal(raw, &job)
	text := st.Content[0].(*mcpsdk.TextContent).Text
	if job.Job.State != jobs.Failed || job.Job.Error == nil || job.Job.Error.Kind != lakegate.KindUnavailable ||
		!strings.Contains(text, "block storage is full or not writable") {
		t.Errorf("got %s, want a failed job naming the block storage", text)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"job failed"`) {
		t.Errorf("no ERROR log line for the job in:\n%s", logs.String())
	}
}

// TestAnswerBudget: no answer's text passes its budget. Without a block
// store a result past it comes as the rows that fit, truncated, with a
// next_cursor whose pages continue it row for row; with one, the rows are
// all in a transfer and the text holds those that fit. A call may ask
// for less (max_chars), never more; a row too long alone comes with its
// long cells cut, so that the pages move on.
func TestAnswerBudget(t *testing.T) {
	const budget = 4000
	page := func(t *testing.T, cs *mcpsdk.ClientSession, args map[string]any, limit int) (ids []string, meta ResultMeta) {
		t.Helper()
		text, meta, links := callSQL(t, cs, args)
		if len(text) > limit {
			t.Fatalf("got %d characters of text, want at most %d", len(text), limit)
		}
		if meta.Transfer == nil && len(links) > 0 {
			t.Errorf("got %d links without a transfer", len(links))
		}
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, "#") {
				ids = append(ids, strings.SplitN(l, ",", 2)[0])
			}
		}
		return ids, meta
	}
	sql := "SELECT id, ts, status, device_id FROM readings WHERE id <= 600 ORDER BY id"

	t.Run("pages without a block store", func(t *testing.T) {
		p, _ := newTestPlugin(t, Options{AnswerChars: budget})
		cs := connectStreamable(t, serveHTTP(t, p).URL, "alice", "2025-11-25", nil)
		var all []string
		args := map[string]any{"database": "iot", "sql": sql, "max_rows": 0}
		for n := 0; ; n++ {
			ids, meta := page(t, cs, args, budget)
			all = append(all, ids...)
			if !meta.Truncated {
				break
			}
			if meta.NextCursor == "" || !strings.Contains(meta.Hint, "4000 characters") || meta.RowCount != len(ids) || len(ids) == 0 {
				t.Fatalf("page %d: got %+v with %d rows, want the rows that fit, next_cursor and a hint naming the budget", n, meta, len(ids))
			}
			if n > 40 {
				t.Fatal("no end after 40 pages")
			}
			args["cursor"] = meta.NextCursor
		}
		if len(all) != 600 || all[0] != "1" || all[599] != "600" {
			t.Fatalf("got %d rows over the pages (%v … %v), want 600 in order", len(all), all[:1], all[len(all)-1:])
		}
		for i, id := range all {
			if id != strconv.Itoa(i+1) {
				t.Fatalf("row %d: got id %s, want %d: the pages skip or repeat rows", i, id, i+1)
			}
		}
	})

	t.Run("max_chars asks for less, never more", func(t *testing.T) {
		p, _ := newTestPlugin(t, Options{AnswerChars: budget})
		cs := connectStreamable(t, serveHTTP(t, p).URL, "alice", "2025-11-25", nil)
		if ids, _ := page(t, cs, map[string]any{"database": "iot", "sql": sql, "max_chars": 1000}, 1000); len(ids) == 0 {
			t.Error("max_chars 1000: no row")
		}
		page(t, cs, map[string]any{"database": "iot", "sql": sql, "max_chars": 1 << 20}, budget)
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": sql, "max_chars": 100}})
		if err != nil || !res.IsError {
			t.Errorf("max_chars 100: got %v %v, want a tool error", res, err)
		}
	})

	t.Run("a row too long alone", func(t *testing.T) {
		p, _ := newTestPlugin(t, Options{AnswerChars: budget})
		cs := connectStreamable(t, serveHTTP(t, p).URL, "alice", "2025-11-25", nil)
		args := map[string]any{"database": "iot", "sql": "SELECT id, printf('%.9000c', 'x') AS big FROM devices ORDER BY id", "max_rows": 0}
		ids, meta := page(t, cs, args, budget)
		if len(ids) != 1 || ids[0] != "1" || !meta.Truncated {
			t.Fatalf("got rows %v (%+v), want the first row alone, cut", ids, meta)
		}
		args["cursor"] = meta.NextCursor
		if ids, _ := page(t, cs, args, budget); len(ids) != 1 || ids[0] != "2" {
			t.Fatalf("next page: got rows %v, want the second row", ids)
		}
	})

	t.Run("a lone row of cells just past the cut", func(t *testing.T) {
		p, _ := newTestPlugin(t, Options{AnswerChars: budget})
		cs := connectStreamable(t, serveHTTP(t, p).URL, "alice", "2025-11-25", nil)
		// Ten cells of 80 characters in 500: each is cut to 64 and marked,
		// which makes it longer than it was; the row is still shown.
		sql := "SELECT " + strings.TrimSuffix(strings.Repeat("printf('%.80c', 'y'), ", 10), ", ")
		text, meta, _ := callSQL(t, cs, map[string]any{"database": "iot", "sql": sql, "max_chars": 500})
		if lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n"); len(lines) < 3 || !strings.Contains(lines[1], "…[cut: 80 bytes in all]") || meta.RowCount != 1 {
			t.Errorf("got %q (%+v), want the row shown with its cells cut", text, meta)
		}
	})

	t.Run("with a block store", func(t *testing.T) {
		store := openStore(t, blocktransport.Options{Dir: t.TempDir(), BlockSize: 4 << 10})
		p, _ := newTestPlugin(t, Options{AnswerChars: budget, Blocks: store, PreviewRows: 1000})
		cs := connectStreamable(t, serveHTTP(t, p).URL, "alice", "2025-11-25", nil)
		text, meta, links := callSQL(t, cs, map[string]any{"database": "iot", "sql": "SELECT * FROM readings ORDER BY id", "max_rows": 0})
		if meta.Mode != ModeBlocks || meta.Transfer == nil || meta.Transfer.Rows != 5000 || meta.PreviewRows == 0 {
			t.Fatalf("got %+v, want 5000 rows in blocks and a preview", meta)
		}
		used := len(text)
		for _, l := range links {
			used += len(l.URI) + len(l.Name) + len(l.Title) + len(l.MIMEType)
		}
		if used > budget || len(links) == 0 || len(links) >= len(meta.Transfer.Blocks) {
			t.Errorf("got %d characters with %d of %d block links, want at most %d, the links that fit",
				used, len(links), len(meta.Transfer.Blocks), budget)
		}
		// A whole block is past the budget too: cut at a row, saying so.
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "get_result_block",
			Arguments: map[string]any{"transfer_id": meta.Transfer.ID, "block": 0}})
		if err != nil || res.IsError {
			t.Fatalf("get_result_block: %v %v", res, err)
		}
		block := res.Content[0].(*mcpsdk.TextContent).Text
		if len(block) > budget || !strings.Contains(block, "# cut: the answer is") || !strings.HasPrefix(block, "[1,") {
			t.Errorf("get_result_block: got %d characters (%.80q…), want the rows that fit in %d and a note", len(block), block, budget)
		}
	})
}

// TestResultWindows: get_result_block reads a transfer by rows, within
// the answer budget, from any offset: pages by next_offset walk every row
// once, in order; a deep offset starts there; CSV rows with quoted line
// ends count as one; past the end there are no rows.
func TestResultWindows(t *testing.T) {
	const budget = 4000
	store := openStore(t, blocktransport.Options{Dir: t.TempDir(), BlockSize: 4 << 10})
	p, _ := newTestPlugin(t, Options{AnswerChars: budget, Blocks: store})
	cs := connectStreamable(t, serveHTTP(t, p).URL, "alice", "2025-11-25", nil)
	// windowText is a window's structured content, as a client reads it.
	type windowText struct {
		Offset     int   `json:"offset"`
		Rows       int   `json:"rows"`
		TotalRows  int64 `json:"total_rows"`
		NextOffset *int  `json:"next_offset"`
	}
	window := func(t *testing.T, args map[string]any) (string, windowText) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "get_result_block", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("get_result_block %v: %v %v", args, res, err)
		}
		text := res.Content[0].(*mcpsdk.TextContent).Text
		if len(text) > budget {
			t.Fatalf("got %d characters, want at most %d", len(text), budget)
		}
		var w windowText
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &w); err != nil {
			t.Fatal(err)
		}
		return text, w
	}
	firstFields := func(text string) []string {
		var ids []string
		for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				ids = append(ids, strings.TrimPrefix(strings.SplitN(l, ",", 2)[0], "["))
			}
		}
		return ids
	}

	_, meta, _ := callSQL(t, cs, map[string]any{"database": "iot", "sql": "SELECT * FROM readings ORDER BY id", "export": true})
	id := meta.Transfer.ID
	if len(meta.Transfer.Blocks) < 10 {
		t.Fatalf("got %d blocks, want many", len(meta.Transfer.Blocks))
	}
	t.Run("pages walk every row once", func(t *testing.T) {
		var all []string
		next := 0
		for page := 0; ; page++ {
			text, w := window(t, map[string]any{"transfer_id": id, "offset": next, "limit": 1000})
			if page == 0 && !strings.HasPrefix(text, "# columns: id, device_id, ts") {
				t.Errorf("got %.60q, want the columns named first", text)
			}
			ids := firstFields(text)
			if len(ids) != w.Rows || w.Rows == 0 || w.Offset != next || w.TotalRows != 5000 {
				t.Fatalf("page %d: got %d rows, %+v", page, len(ids), w)
			}
			all = append(all, ids...)
			if w.NextOffset == nil {
				break
			}
			next = *w.NextOffset
			if page > 500 {
				t.Fatal("no end")
			}
		}
		for i, id := range all {
			if id != strconv.Itoa(i+1) {
				t.Fatalf("row %d: got id %s: the pages skip or repeat rows (%d rows in all)", i, id, len(all))
			}
		}
		if len(all) != 5000 {
			t.Fatalf("got %d rows, want 5000", len(all))
		}
	})
	t.Run("a deep offset", func(t *testing.T) {
		text, w := window(t, map[string]any{"transfer_id": id, "offset": 4990, "limit": 5})
		if got := firstFields(text); strings.Join(got, " ") != "4991 4992 4993 4994 4995" || w.NextOffset == nil || *w.NextOffset != 4995 {
			t.Errorf("got rows %v, next %v, want 4991 to 4995 and next_offset 4995", got, w.NextOffset)
		}
		// A limit past the result reads no more blocks than the budget
		// holds: the rows that fit, and next_offset.
		_, fresh, _ := callSQL(t, cs, map[string]any{"database": "iot", "sql": "SELECT * FROM readings ORDER BY id", "export": true})
		_, w = window(t, map[string]any{"transfer_id": fresh.Transfer.ID, "offset": 0, "limit": 1000000})
		if w.Rows == 0 || w.Rows > 100 || w.NextOffset == nil || *w.NextOffset != w.Rows {
			t.Errorf("a huge limit: got %d rows, next %v, want the rows that fit and next_offset", w.Rows, w.NextOffset)
		}
		if read := p.tools.BlocksCounted(fresh.Transfer.ID); read > 3 {
			t.Errorf("a huge limit read %d of %d blocks, want only those the budget holds", read, len(fresh.Transfer.Blocks))
		}
		text, w = window(t, map[string]any{"transfer_id": id, "offset": 6000})
		if w.Rows != 0 || w.NextOffset != nil || !strings.Contains(text, "no rows") {
			t.Errorf("past the end: got %q %+v, want no rows", text, w)
		}
	})
	t.Run("CSV rows with quoted line ends", func(t *testing.T) {
		_, meta, _ := callSQL(t, cs, map[string]any{"database": "iot", "format": "csv", "export": true,
			"sql": `SELECT id, 'a' || char(10) || 'b"c' AS t FROM readings ORDER BY id`})
		text, w := window(t, map[string]any{"transfer_id": meta.Transfer.ID, "offset": 100, "limit": 3})
		if !strings.HasPrefix(text, "id,t\n101,\"a\nb\"\"c\"\n102,") || w.Rows != 3 {
			t.Errorf("got %q %+v, want the header and rows 101 to 103 whole", text, w)
		}
	})
}
