package integration

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/tls"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/internal/testcert"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/jobs"
	"github.com/lakegate/lakegate/mcp"
)

func TestBlocksEveryWayOverSSE(t *testing.T) {
	e := blockEnv(t, blocktransport.Options{}, false)
	tok := token("alice", "reader")
	cs := e.connect(t, tok)
	want := pgRows(t, e)

	br, res := export(t, cs, allReadings, map[string]any{"max_rows": 0})
	m := br.Transfer
	if br.RowCount != len(want) || m.Rows != int64(len(want)) || len(br.Rows) != 20 || br.Truncated {
		t.Errorf("got row_count %d, manifest rows %d, %d preview rows, truncated %v; want %d, %d, 20, false",
			br.RowCount, m.Rows, len(br.Rows), br.Truncated, len(want), len(want))
	}
	if len(m.Blocks) < 10 || m.Format != "ndjson" || !m.Expires.After(m.Created) {
		t.Errorf("manifest: %d blocks, format %q, created %s expires %s; want >= 10 ndjson blocks", len(m.Blocks), m.Format, m.Created, m.Expires)
	}
	var links []*mcpsdk.ResourceLink
	for _, c := range res.Content[1:] {
		if l, ok := c.(*mcpsdk.ResourceLink); ok {
			links = append(links, l)
		}
	}
	if len(links) != len(m.Blocks) {
		t.Fatalf("got %d resource links, want one per block (%d)", len(links), len(m.Blocks))
	}
	text := res.Content[0].(*mcpsdk.TextContent).Text
	if !strings.Contains(text, m.ID) || !strings.Contains(text, "# rows: 5000") {
		t.Errorf("text content %q: want the row count and the transfer id", text)
	}

	// 1. resources/read of every link.
	var byResource [][]byte
	for _, l := range links {
		rr, err := cs.ReadResource(t.Context(), &mcpsdk.ReadResourceParams{URI: l.URI})
		if err != nil {
			t.Fatalf("read %s: %v", l.URI, err)
		}
		byResource = append(byResource, []byte(rr.Contents[0].Text))
	}
	whole := checkManifest(t, m, byResource)
	checkNDJSON(t, whole, want)

	// 2. The get_result_block tool.
	var byTool [][]byte
	for n := range m.Blocks {
		r, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "get_result_block",
			Arguments: map[string]any{"transfer_id": m.ID, "block": n}})
		if err != nil || r.IsError {
			t.Fatalf("get_result_block %d: %v %v", n, err, r)
		}
		byTool = append(byTool, []byte(r.Content[0].(*mcpsdk.TextContent).Text))
	}
	checkManifest(t, m, byTool)

	// 3. HTTP: the parallel client, /all, one block with Range and ETag.
	var fetched bytes.Buffer
	c := &blocktransport.Client{BaseURL: e.base + mcp.BlocksPath, DecodeError: lakegate.DecodeError, Token: tok, Parallel: 3}
	if _, err := c.Fetch(t.Context(), m.ID, &fetched); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fetched.Bytes(), whole) {
		t.Errorf("parallel fetch: got %d bytes, want the %d bytes of the blocks", fetched.Len(), len(whole))
	}
	// /all computes the SHA-256 as it sends the whole, as a trailer, and
	// keeps it: the manifest has it then, and a later /all sends it first.
	sum := sha256.Sum256(whole)
	for i, where := range []string{"trailer", "header"} {
		resp, err := httpClient(tok).Get(e.base + "/mcp/blocks/" + m.ID + "/all")
		if err != nil {
			t.Fatal(err)
		}
		all, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(all, whole) {
			t.Errorf("GET /all #%d: got %d and %d bytes (%v), want 200 and %d bytes", i+1, resp.StatusCode, len(all), err, len(whole))
		}
		if got := resp.Header.Get("X-Content-Sha256"); sentSum(resp) != hex.EncodeToString(sum[:]) || (where == "header") != (got != "") {
			t.Errorf("GET /all #%d: header %q, trailer %q; want the SHA-256 %x as a %s", i+1, got, resp.Trailer.Get("X-Content-Sha256"), sum, where)
		}
	}
	var read blocktransport.Manifest
	if code, body := get(t, e.base+"/mcp/blocks/"+m.ID, tok); code != 200 || json.Unmarshal([]byte(body), &read) != nil || read.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("the manifest once the whole was read: %d, sha256 %q; want %x", code, read.SHA256, sum)
	}
	req, _ := http.NewRequest("GET", e.base+"/mcp/blocks/"+m.ID+"/1", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Range", "bytes=10-19")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(part, byResource[1][10:20]) || resp.Header.Get("ETag") != `"`+m.Blocks[1].CRC32C+`"` {
		t.Errorf("Range: got %d %q etag %s, want 206 %q and the block's CRC-32C", resp.StatusCode, part, resp.Header.Get("ETag"), byResource[1][10:20])
	}
	req.Header.Del("Range")
	req.Header.Set("If-None-Match", `"`+m.Blocks[1].CRC32C+`"`)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: got %d, want 304", resp.StatusCode)
	}
}

func TestBlocksInlineUnderThreshold(t *testing.T) {
	e := blockEnv(t, blocktransport.Options{}, false)
	cs := e.connect(t, token("alice", "reader"))
	// No cap, but small: inline, with every row.
	var r result
	res := callJSON(t, cs, "run_sql", map[string]any{"database": "iot", "sql": "SELECT id, ts FROM readings WHERE id <= 250 ORDER BY id", "max_rows": 0}, &r)
	if res.IsError || r.RowCount != 250 || len(r.Rows) != 250 || r.Rows[249][0] != json.Number("250") {
		t.Errorf("inline: got %d rows (%d listed), error %v; want 250 rows inline", r.RowCount, len(r.Rows), res.IsError)
	}
	// The default cap (100 rows) applies without max_rows.
	res = callJSON(t, cs, "query", map[string]any{"database": "iot", "table": "readings"}, &r)
	if res.IsError || r.RowCount != 100 || !r.Truncated {
		t.Errorf("query default: got %d rows truncated %v, want 100 and true", r.RowCount, r.Truncated)
	}
	// export sends even a small result to blocks.
	br, _ := export(t, cs, "SELECT id FROM readings WHERE id <= 5 ORDER BY id", map[string]any{"export": true})
	if br.RowCount != 5 || len(br.Transfer.Blocks) != 1 {
		t.Errorf("small export: got %d rows in %d blocks, want 5 rows in 1 block", br.RowCount, len(br.Transfer.Blocks))
	}
	// The query tool streams into blocks too.
	var qb blockResult
	res = callJSON(t, cs, "query", map[string]any{"database": "iot", "table": "readings", "max_rows": 0, "order_by": []any{map[string]any{"column": "id"}}}, &qb)
	if res.IsError || qb.Mode != "blocks" || qb.RowCount != 5000 {
		t.Errorf("query max_rows 0: got mode %q, %d rows; want blocks with 5000 rows", qb.Mode, qb.RowCount)
	}
	// The planner expects about every row here (<> is 99.5% selective to
	// it), far over the threshold, so the rows go straight to a transfer;
	// only three come, and the answer is inline after all.
	before := e.blocks.Stats().Aborted
	res = callJSON(t, cs, "run_sql", map[string]any{"database": "iot", "max_rows": 0,
		"sql": "SELECT * FROM readings WHERE md5(status) <> md5(status) OR id <= 3 ORDER BY id"}, &r)
	if res.IsError || r.RowCount != 3 || len(r.Rows) != 3 || e.blocks.Stats().Aborted != before+1 {
		t.Errorf("over-estimated: got %d rows inline, %d transfers dropped; want 3 rows inline after one dropped transfer",
			len(r.Rows), e.blocks.Stats().Aborted-before)
	}
	// A capped (batch) result whose JSON passes the threshold goes to blocks
	// too, every cell intact.
	tok := token("alice", "reader")
	wide, _ := export(t, cs, "SELECT id, status, repeat(md5(id::text), 40) AS pad FROM readings ORDER BY id", map[string]any{"max_rows": 100})
	var body bytes.Buffer
	if _, err := (&blocktransport.Client{BaseURL: e.base + mcp.BlocksPath, DecodeError: lakegate.DecodeError, Token: tok}).Fetch(t.Context(), wide.Transfer.ID, &body); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(body.String(), "\n"), "\n")
	for i, line := range lines {
		row := decodeRow(t, []byte(line))
		sum := md5.Sum([]byte(strconv.Itoa(i + 1)))
		status := []string{"ok", "ok", "ok", "ok", "warn", "fail"}[(i+1)%6] // as seed.sql
		if len(row) != 3 || row[0] != json.Number(strconv.Itoa(i+1)) || row[1] != status || row[2] != strings.Repeat(hex.EncodeToString(sum[:]), 40) {
			t.Fatalf("wide batch row %d: got %.80v", i, row)
		}
	}
	if len(lines) != 100 || wide.RowCount != 100 || !wide.Truncated {
		t.Errorf("wide batch: got %d rows (row_count %d, truncated %v), want 100 and truncated", len(lines), wide.RowCount, wide.Truncated)
	}
	// The old argument name is refused with the new one.
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": "SELECT 1", "limit": 5}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcpsdk.TextContent).Text, "max_rows") {
		t.Errorf("limit: got %v %v, want an error naming max_rows", res, err)
	}
}

func TestBlocksCSV(t *testing.T) {
	e := blockEnv(t, blocktransport.Options{}, false)
	tok := token("alice", "reader")
	cs := e.connect(t, tok)
	br, _ := export(t, cs, allReadings, map[string]any{"export": true, "format": "csv"})
	rows := 0
	for n := range br.Transfer.Blocks {
		r, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "get_result_block", Arguments: map[string]any{"transfer_id": br.Transfer.ID, "block": n}})
		if err != nil || r.IsError {
			t.Fatalf("block %d: %v %v", n, err, r)
		}
		recs, err := csv.NewReader(strings.NewReader(r.Content[0].(*mcpsdk.TextContent).Text)).ReadAll()
		if err != nil {
			t.Fatalf("block %d does not parse alone as CSV: %v", n, err)
		}
		if n == 0 {
			if strings.Join(recs[0], ",") != "id,device_id,ts,temperature,humidity,power_w,status,note" {
				t.Errorf("block 0 header: got %v", recs[0])
			}
			recs = recs[1:]
		}
		rows += len(recs)
	}
	if rows != 5000 {
		t.Errorf("CSV blocks hold %d rows, want 5000", rows)
	}
}

func TestBlocksOwnershipAndExpiry(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := blockEnv(t, blocktransport.Options{TTL: time.Minute, Now: clock}, false)
	alice := token("alice", "reader")
	cs := e.connect(t, alice)
	br, _ := export(t, cs, allReadings, map[string]any{"export": true})
	id := br.Transfer.ID

	bob := token("bob", "reader")
	csBob := e.connect(t, bob)
	if _, err := csBob.ReadResource(t.Context(), &mcpsdk.ReadResourceParams{URI: "lakegate://transfers/" + id + "/blocks/0"}); err == nil {
		t.Error("bob read alice's block by resources/read")
	}
	r, err := csBob.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "get_result_block", Arguments: map[string]any{"transfer_id": id, "block": 0}})
	if err != nil || !r.IsError || !strings.Contains(r.Content[0].(*mcpsdk.TextContent).Text, "not_found") {
		t.Errorf("bob get_result_block: got %v %v, want not_found", r, err)
	}
	for _, path := range []string{"", "/0", "/all"} {
		if code, _ := get(t, e.base+"/mcp/blocks/"+id+path, bob); code != http.StatusNotFound {
			t.Errorf("bob GET /mcp/blocks/%s%s: got %d, want 404", id, path, code)
		}
		if code, _ := get(t, e.base+"/mcp/blocks/"+id+path, token("root", "admin")); code != http.StatusOK {
			t.Errorf("admin GET /mcp/blocks/%s%s: got %d, want 200", id, path, code)
		}
	}
	if code, _ := get(t, e.base+"/mcp/blocks/"+id+"/99", alice); code != http.StatusNotFound {
		t.Errorf("block 99: got %d, want 404", code)
	}
	if code, _ := get(t, e.base+"/mcp/blocks/"+id+"/x", alice); code != http.StatusBadRequest {
		t.Errorf("block x: got %d, want 400", code)
	}

	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if code, _ := get(t, e.base+"/mcp/blocks/"+id, alice); code != http.StatusNotFound {
		t.Errorf("after the TTL: got %d, want 404", code)
	}
	e.blocks.Expire()
	if _, err := os.Stat(filepath.Join(e.blocksDir, id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after expiry the transfer's files are still there: %v", err)
	}
	if st := e.blocks.Stats(); st.Transfers != 0 || st.Bytes != 0 || st.Expired != 1 {
		t.Errorf("stats after expiry: %+v, want nothing stored and 1 expired", st)
	}
}

func TestBlocksBudgets(t *testing.T) {
	// allReadings is about 310 KB of NDJSON.
	e := blockEnv(t, blocktransport.Options{MaxBytesPerOwner: 500 << 10, MaxBytes: 900 << 10}, false)
	alice := e.connect(t, token("alice", "reader"))
	kind := func(cs *mcpsdk.ClientSession, sql string) lakegate.ErrorBody {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": sql, "export": true}})
		job, ok := jobOf(t, res)
		if err != nil || !ok {
			t.Fatalf("got %v %v, want an export job", res, err)
		}
		if _, st := awaitJob(t, cs, job.ID); st.State != jobs.Failed || st.Error == nil {
			t.Fatalf("got a job %s, want it failed", st.State)
		} else {
			return *st.Error
		}
		return lakegate.ErrorBody{}
	}
	// One result alone over the budget (1.2 MB): no retry will help.
	carol := e.connect(t, token("carol", "reader"))
	if got := kind(carol, "SELECT r.*, s.* FROM readings r, readings s WHERE s.id <= 2"); got.Kind != "validation_error" || !strings.Contains(got.Hint, "max_rows") {
		t.Errorf("a result over the budget by itself: got %+v, want validation_error hinting max_rows", got)
	}
	export(t, alice, allReadings, map[string]any{"export": true})
	// A second one passes alice's budget: retry once the first expires.
	if got := kind(alice, allReadings); got.Kind != "rate_limited" || got.RetryAfter <= 0 {
		t.Errorf("over the subject's budget: got %+v, want rate_limited with retry_after", got)
	}
	// bob's export fits; dave's fits his budget but not the store's.
	export(t, e.connect(t, token("bob", "reader")), allReadings, map[string]any{"export": true})
	if got := kind(e.connect(t, token("dave", "reader")), allReadings); got.Kind != "unavailable" {
		t.Errorf("over the store's budget: got %+v, want unavailable", got)
	}
	st := e.blocks.Stats()
	if st.Transfers != 2 || st.Aborted != 3 || transferDirs(t, e) != 2 {
		t.Errorf("stats: %+v, %d directories; want the partial transfers removed and two kept", st, transferDirs(t, e))
	}
}

// transferDirs counts the transfer directories in e's spool.
func transferDirs(t *testing.T, e *env) int {
	t.Helper()
	entries, err := os.ReadDir(e.blocksDir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestBlocksCancelRemovesPartialTransfer: cancel_job stops an export
// job while its transfer is being written, and its files go.
func TestBlocksCancelRemovesPartialTransfer(t *testing.T) {
	e := blockEnv(t, blocktransport.Options{}, false)
	cs := e.connectHTTP(t, token("alice", "reader"), "2025-11-25", nil)
	// Seconds of rows: a correlated sum over 20,000 numbers per row.
	slow := "SELECT r.id, repeat('x', 500) AS pad, (SELECT sum(x) FROM generate_series(1, 20000 + r.id % 2) x) FROM readings r ORDER BY r.id"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": slow, "export": true}})
	job, ok := jobOf(t, res)
	if err != nil || !ok {
		t.Fatalf("got %v %v, want an export job", res, err)
	}
	// Wait for the job to report bytes written to a transfer, then cancel
	// it.
	var seen jobs.Status
	testutil.Eventually(t, 20*time.Second, "the job reporting bytes written to a transfer", func() bool {
		st, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "job_status", Arguments: map[string]any{"job_id": job.ID}})
		if err != nil {
			return false
		}
		var out struct{ Job jobs.Status }
		raw, _ := json.Marshal(st.StructuredContent)
		_ = json.Unmarshal(raw, &out)
		seen = out.Job
		return seen.Rows > 0 && seen.Bytes > 0 && e.blocks.Stats().Transfers == 1
	})
	t.Logf("job %s: %d rows, %d bytes", seen.State, seen.Rows, seen.Bytes)
	if st, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "cancel_job", Arguments: map[string]any{"job_id": job.ID}}); err != nil || st.IsError {
		t.Fatalf("cancel_job: %v %v", st, err)
	}
	testutil.Eventually(t, 10*time.Second, "the transfer aborted and deleted", func() bool { st := e.blocks.Stats(); return st.Aborted == 1 && st.Transfers == 0 && st.Bytes == 0 })
	if n := transferDirs(t, e); n != 0 {
		t.Errorf("%d transfer directories left after cancel, want 0", n)
	}
}

func TestBlocksCorruptionDetected(t *testing.T) {
	e := blockEnv(t, blocktransport.Options{}, false)
	tok := token("alice", "reader")
	cs := e.connect(t, tok)
	br, _ := export(t, cs, allReadings, map[string]any{"export": true})
	m := br.Transfer
	path := filepath.Join(e.blocksDir, m.ID, "2")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[100] ^= 0x20 // same size, one letter's case
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &blocktransport.Client{BaseURL: e.base + mcp.BlocksPath, DecodeError: lakegate.DecodeError, Token: tok, Parallel: 4}
	_, err = c.Fetch(t.Context(), m.ID, io.Discard)
	var ce *blocktransport.ChecksumError
	if !errors.As(err, &ce) {
		t.Errorf("fetch of a damaged block: got %v, want a checksum error", err)
	}
	if _, err := cs.ReadResource(t.Context(), &mcpsdk.ReadResourceParams{URI: "lakegate://transfers/" + m.ID + "/blocks/2"}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("resources/read of a damaged block: got %v, want an error saying it is damaged", err)
	}
	// /all cuts the stream off before the end.
	resp, err := httpClient(tok).Get(e.base + "/mcp/blocks/" + m.ID + "/all")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil || n >= m.Bytes {
		t.Errorf("/all with a damaged block: read %d of %d bytes, error %v; want a cut-off body", n, m.Bytes, err)
	}
}

func TestBlocksOverHTTP3(t *testing.T) {
	e := blockEnv(t, blocktransport.Options{}, true)
	tok := token("alice", "reader")
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: e.clientTLS, ForceAttemptHTTP2: true}}
	defer h2.CloseIdleConnections()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "lakegate-it", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.SSEClientTransport{Endpoint: e.base + "/mcp/sse", HTTPClient: &http.Client{Transport: testutil.Bearer{Token: tok, Base: h2.Transport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	br, _ := export(t, cs, allReadings, map[string]any{"export": true})

	// The HTTPS answer advertises HTTP/3.
	req, _ := http.NewRequest("GET", e.base+"/health", nil)
	resp, err := h2.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(e.base, "https://"))
	if got := resp.Header.Get("Alt-Svc"); got != `h3=":`+port+`"; ma=86400` || resp.ProtoMajor != 2 {
		t.Errorf("HTTPS: got %s with Alt-Svc %q, want HTTP/2 advertising h3 on port %s", resp.Proto, got, port)
	}

	h3 := blocktransport.NewHTTP3(e.clientTLS)
	defer blocktransport.CloseHTTP3(h3)
	var over3, over2 bytes.Buffer
	c3 := &blocktransport.Client{BaseURL: e.base + mcp.BlocksPath, DecodeError: lakegate.DecodeError, Token: tok, HTTP: h3, Parallel: 4}
	if _, err := c3.Fetch(t.Context(), br.Transfer.ID, &over3); err != nil {
		t.Fatalf("fetch over HTTP/3: %v", err)
	}
	c2 := &blocktransport.Client{BaseURL: e.base + mcp.BlocksPath, DecodeError: lakegate.DecodeError, Token: tok, HTTP: h2, Parallel: 4}
	if _, err := c2.Fetch(t.Context(), br.Transfer.ID, &over2); err != nil {
		t.Fatalf("fetch over HTTP/2: %v", err)
	}
	checkNDJSON(t, over3.Bytes(), pgRows(t, e))
	if !bytes.Equal(over3.Bytes(), over2.Bytes()) {
		t.Error("HTTP/3 and HTTP/2 fetches differ")
	}
	// A request over HTTP/3 really is HTTP/3.
	req, _ = http.NewRequest("GET", e.base+"/mcp/blocks/"+br.Transfer.ID, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if resp, err = h3.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 3 || resp.StatusCode != 200 {
		t.Errorf("got %s %d, want HTTP/3 200", resp.Proto, resp.StatusCode)
	}

	// Streamable HTTP calls, which lakegate's own transports answer (a
	// stateless call, and a call in a 2025-11-25 session with its GET
	// stream open, which stays with its handler), over HTTP/2 and HTTP/3.
	for name, rt := range map[string]http.RoundTripper{"HTTP/2": h2.Transport, "HTTP/3": h3.Transport} {
		for _, revision := range []string{"2026-07-28", "2025-11-25"} {
			var opts *mcpsdk.ClientSessionOptions
			if revision != "2026-07-28" {
				opts = &mcpsdk.ClientSessionOptions{ProtocolVersion: revision}
			}
			cs, err := client.Connect(t.Context(), &mcpsdk.StreamableClientTransport{Endpoint: e.base + "/mcp",
				HTTPClient: &http.Client{Transport: testutil.Bearer{Token: tok, Base: rt}}, MaxRetries: -1}, opts)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, revision, err)
			}
			res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{"database": "iot", "sql": "SELECT 41 + 1 AS answer"}})
			switch {
			case err != nil || res.IsError:
				t.Errorf("%s, %s: run_sql: %v %v", name, revision, err, res)
			case cs.InitializeResult().ProtocolVersion != revision || !strings.Contains(res.Content[0].(*mcpsdk.TextContent).Text, "42"):
				t.Errorf("%s: revision %s, answer %q; want %s and 42", name, cs.InitializeResult().ProtocolVersion, res.Content[0].(*mcpsdk.TextContent).Text, revision)
			}
			cs.Close()
		}
	}
}

// serverCert makes a server certificate for 127.0.0.1 and returns its
// files and a client config trusting it.
func serverCert(t *testing.T) (certFile, keyFile string, client *tls.Config) {
	t.Helper()
	ca := testcert.New(t, "lakegate-test")
	certFile, keyFile = ca.Issue(t, "server", true)
	return certFile, keyFile, &tls.Config{RootCAs: ca.Pool()}
}
