package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"strconv"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/jobs"
	"github.com/lakegate/lakegate/mcp"
)

// allReadings is the query whose result the block tests move: 5000 rows,
// about 600 KB of NDJSON.
const allReadings = "SELECT * FROM readings ORDER BY id"

// blockEnv starts a server whose results go to blocks past 64 KiB, in
// blocks of 16 KiB.
func blockEnv(t *testing.T, bo blocktransport.Options, tlsOn bool) *env {
	t.Helper()
	if bo.BlockSize == 0 {
		bo.BlockSize = 16 << 10
	}
	return start(t, envOptions{blocks: &bo, tls: tlsOn, plugin: func(o *mcp.Options) { o.BlockThreshold = 64 << 10 }})
}

// blockResult is the structured content of a result sent to blocks.
type blockResult struct {
	Columns   []map[string]any         `json:"columns"`
	Rows      [][]any                  `json:"rows"`
	RowCount  int                      `json:"row_count"`
	Truncated bool                     `json:"truncated"`
	Mode      string                   `json:"mode"`
	Transfer  *blocktransport.Manifest `json:"transfer"`
	// Job is the export job that wrote it.
	Job *jobs.Status `json:"job"`
}

// export runs sql through run_sql with the given extra arguments and
// returns the result sent to blocks.
func export(t *testing.T, cs *mcpsdk.ClientSession, sql string, extra map[string]any) (*blockResult, *mcpsdk.CallToolResult) {
	t.Helper()
	args := map[string]any{"database": "iot", "sql": sql}
	for k, v := range extra {
		args[k] = v
	}
	var br blockResult
	res := callJSON(t, cs, "run_sql", args, &br)
	if res.IsError {
		t.Fatalf("run_sql: %s", res.Content[0].(*mcpsdk.TextContent).Text)
	}
	if br.Mode != "blocks" || br.Transfer == nil {
		t.Fatalf("run_sql %v: got mode %q, want a result in blocks", extra, br.Mode)
	}
	return &br, res
}

// pgRows returns the rows of allReadings as PostgreSQL's JSON arrays.
func pgRows(t *testing.T, e *env) [][]any {
	t.Helper()
	rows, err := e.pool.Query(t.Context(), "SELECT json_build_array(id, device_id, ts, temperature, humidity, power_w, status, note)::text FROM readings ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			t.Fatal(err)
		}
		out = append(out, decodeRow(t, []byte(text)))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func decodeRow(t *testing.T, line []byte) []any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var row []any
	if err := dec.Decode(&row); err != nil {
		t.Fatalf("row %q: %v", line, err)
	}
	return row
}

// sameValue compares a value of ours with PostgreSQL's JSON of it:
// numbers by value (numeric may come as a string), timestamps by instant.
func sameValue(ours, pg any) bool {
	num := func(v any) (float64, bool) {
		var s string
		switch x := v.(type) {
		case json.Number:
			s = string(x)
		case string:
			s = x
		default:
			return 0, false
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil
	}
	if a, ok := num(ours); ok {
		if b, ok := num(pg); ok {
			return a == b
		}
	}
	as, aok := ours.(string)
	bs, bok := pg.(string)
	if aok && bok {
		if as == bs {
			return true
		}
		ta, err1 := time.Parse(time.RFC3339Nano, as)
		tb, err2 := time.Parse(time.RFC3339Nano, bs)
		return err1 == nil && err2 == nil && ta.Equal(tb)
	}
	return ours == nil && pg == nil
}

// checkNDJSON checks that data holds exactly PostgreSQL's rows.
func checkNDJSON(t *testing.T, data []byte, want [][]any) {
	t.Helper()
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(lines) != len(want) {
		t.Fatalf("got %d rows, PostgreSQL has %d", len(lines), len(want))
	}
	for i, line := range lines {
		got := decodeRow(t, line)
		if len(got) != len(want[i]) {
			t.Fatalf("row %d: got %d values, want %d", i, len(got), len(want[i]))
		}
		for j := range got {
			if !sameValue(got[j], want[i][j]) {
				t.Fatalf("row %d column %d: got %v, PostgreSQL has %v", i, j, got[j], want[i][j])
			}
		}
	}
}

// checkManifest checks the blocks against their manifest: sizes, SHA-256,
// row alignment and the whole's SHA-256.
func checkManifest(t *testing.T, m *blocktransport.Manifest, blocks [][]byte) []byte {
	t.Helper()
	if len(blocks) != len(m.Blocks) {
		t.Fatalf("got %d blocks, the manifest lists %d", len(blocks), len(m.Blocks))
	}
	var all []byte
	for i, b := range blocks {
		sum := fmt.Sprintf("%08x", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
		if int64(len(b)) != m.Blocks[i].Size || sum != m.Blocks[i].CRC32C {
			t.Errorf("block %d: %d bytes crc32c %s, manifest says %d bytes %s", i, len(b), sum, m.Blocks[i].Size, m.Blocks[i].CRC32C)
		}
		if len(b) == 0 || b[len(b)-1] != '\n' {
			t.Errorf("block %d does not end on a row", i)
		}
		all = append(all, b...)
	}
	if int64(len(all)) != m.Bytes || m.SHA256 != "" {
		t.Errorf("whole: %d bytes, manifest says %d bytes and sha256 %q (none until a reader reads the whole)", len(all), m.Bytes, m.SHA256)
	}
	return all
}

// sentSum is the SHA-256 a response of /all gives its body: a header, or
// a trailer once the body is read.
func sentSum(resp *http.Response) string {
	return resp.Header.Get("X-Content-Sha256") + resp.Trailer.Get("X-Content-Sha256")
}
