package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/mcp"
)

// corpusCall is one call of the agent corpus: a lakegate tool call and the
// nearest call of DBHub's default tools (execute_sql, search_objects).
type corpusCall struct {
	name      string
	tool      string
	args      map[string]any
	dbhubTool string
	dbhubArgs map[string]any
}

// fromReply marks an argument taken from an earlier lakegate reply.
type fromReply string

const (
	lastCursor   fromReply = "next_cursor of the call before"
	lastTransfer fromReply = "transfer_id of the last result in blocks"
)

// sqlCall is DBHub's execute_sql of one statement.
func sqlCall(c corpusCall, sql string) corpusCall {
	c.dbhubTool, c.dbhubArgs = "execute_sql", map[string]any{"sql": sql}
	return c
}

// searchCall is DBHub's search_objects.
func searchCall(c corpusCall, args map[string]any) corpusCall {
	c.dbhubTool, c.dbhubArgs = "search_objects", args
	return c
}

// iot adds the database argument of lakegate's tools.
func iot(args map[string]any) map[string]any {
	args["database"] = "iot"
	return args
}

// agentCorpus is what an agent typically asks of a database: the schema,
// point lookups, aggregates, many rows at once, pages, windows of a large
// result, time series and plans. Over the integration seed (50 devices,
// 5,000 readings every 3 s from 2025-01-01 00:00 UTC).
func agentCorpus() []corpusCall {
	const page = "SELECT * FROM readings ORDER BY id"
	series := func(group []string, aggs ...any) map[string]any {
		a := iot(map[string]any{"table": "readings", "time_column": "ts", "bucket": map[string]any{"unit": "hour"},
			"start": "2025-01-01T00:00:00Z", "end": "2025-01-01T05:00:00Z", "aggregates": aggs})
		if group != nil {
			a["group_by"] = group
		}
		return a
	}
	return []corpusCall{
		searchCall(corpusCall{name: "list databases", tool: "list_databases", args: map[string]any{}},
			map[string]any{"object_type": "schema"}),
		searchCall(corpusCall{name: "list tables", tool: "list_tables", args: iot(map[string]any{})},
			map[string]any{"object_type": "table", "detail_level": "summary"}),
		searchCall(corpusCall{name: "describe devices", tool: "describe_table", args: iot(map[string]any{"table": "devices"})},
			map[string]any{"object_type": "column", "schema": "public", "table": "devices", "detail_level": "full"}),
		searchCall(corpusCall{name: "describe readings", tool: "describe_table", args: iot(map[string]any{"table": "readings"})},
			map[string]any{"object_type": "column", "schema": "public", "table": "readings", "detail_level": "full"}),
		sqlCall(corpusCall{name: "all devices", tool: "query", args: iot(map[string]any{"table": "devices"})},
			"SELECT * FROM devices ORDER BY id"),
		sqlCall(corpusCall{name: "one device", tool: "run_sql", args: iot(map[string]any{"sql": "SELECT * FROM devices WHERE id = 7"})},
			"SELECT * FROM devices WHERE id = 7"),
		sqlCall(corpusCall{name: "one reading", tool: "run_sql", args: iot(map[string]any{"sql": "SELECT * FROM readings WHERE id = 4242"})},
			"SELECT * FROM readings WHERE id = 4242"),
		sqlCall(corpusCall{name: "a device's last 10", tool: "query", args: iot(map[string]any{"table": "readings",
			"filters":  []any{map[string]any{"column": "device_id", "op": "=", "value": 7}},
			"order_by": []any{map[string]any{"column": "ts", "desc": true}}, "max_rows": 10})},
			"SELECT * FROM readings WHERE device_id = 7 ORDER BY ts DESC LIMIT 10"),
		sqlCall(corpusCall{name: "count", tool: "run_sql", args: iot(map[string]any{"sql": "SELECT count(*) FROM readings"})},
			"SELECT count(*) FROM readings"),
		sqlCall(corpusCall{name: "count by status", tool: "run_sql", args: iot(map[string]any{"sql": "SELECT status, count(*) FROM readings GROUP BY status ORDER BY status"})},
			"SELECT status, count(*) FROM readings GROUP BY status ORDER BY status"),
		sqlCall(corpusCall{name: "avg temperature per device", tool: "query", args: iot(map[string]any{"table": "readings",
			"columns":  []any{"device_id", map[string]any{"agg": "avg", "column": "temperature", "as": "avg_t"}},
			"group_by": []any{"device_id"}})},
			"SELECT device_id, avg(temperature) AS avg_t FROM readings GROUP BY device_id ORDER BY device_id"),
		sqlCall(corpusCall{name: "min/max ts", tool: "run_sql", args: iot(map[string]any{"sql": "SELECT min(ts), max(ts) FROM readings"})},
			"SELECT min(ts), max(ts) FROM readings"),
		sqlCall(corpusCall{name: "count per site (join)", tool: "query", args: iot(map[string]any{"table": "readings",
			"columns": []any{"devices.site", map[string]any{"agg": "count"}}, "joins": []any{map[string]any{"table": "devices"}},
			"group_by": []any{"devices.site"}})},
			"SELECT d.site, count(*) FROM readings r JOIN devices d ON d.id = r.device_id GROUP BY d.site ORDER BY d.site"),
		sqlCall(corpusCall{name: "a device's warm warnings", tool: "run_sql", args: iot(map[string]any{
			"sql": "SELECT id, ts, temperature FROM readings WHERE device_id = $1 AND status = 'warn' AND temperature > $2 ORDER BY ts", "params": []any{3, 25}})},
			"SELECT id, ts, temperature FROM readings WHERE device_id = 3 AND status = 'warn' AND temperature > 25 ORDER BY ts"),
		sqlCall(corpusCall{name: "readings with a note", tool: "query", args: iot(map[string]any{"table": "readings",
			"columns": []any{"id", "device_id", "ts", "note"}, "filters": []any{map[string]any{"column": "note", "op": "is_not_null"}}})},
			"SELECT id, device_id, ts, note FROM readings WHERE note IS NOT NULL ORDER BY id"),
		sqlCall(corpusCall{name: "latest per device", tool: "run_sql", args: iot(map[string]any{"sql": "SELECT DISTINCT ON (device_id) * FROM readings ORDER BY device_id, ts DESC"})},
			"SELECT DISTINCT ON (device_id) * FROM readings ORDER BY device_id, ts DESC"),
		sqlCall(corpusCall{name: "5,000 rows (max_rows 5000)", tool: "run_sql", args: iot(map[string]any{"sql": "SELECT * FROM readings LIMIT 5000", "max_rows": 5000})},
			"SELECT * FROM readings LIMIT 5000"),
		sqlCall(corpusCall{name: "whole table (max_rows 0)", tool: "run_sql", args: iot(map[string]any{"sql": "SELECT * FROM readings", "max_rows": 0})},
			"SELECT * FROM readings"),
		sqlCall(corpusCall{name: "window: rows 0-99", tool: "get_result_block", args: map[string]any{"transfer_id": lastTransfer, "offset": 0, "limit": 100}},
			"SELECT * FROM readings LIMIT 100"),
		sqlCall(corpusCall{name: "window: rows 2500-2599", tool: "get_result_block", args: map[string]any{"transfer_id": lastTransfer, "offset": 2500, "limit": 100}},
			"SELECT * FROM readings LIMIT 100 OFFSET 2500"),
		sqlCall(corpusCall{name: "window: rows 1000-1999", tool: "get_result_block", args: map[string]any{"transfer_id": lastTransfer, "offset": 1000, "limit": 1000}},
			"SELECT * FROM readings LIMIT 1000 OFFSET 1000"),
		sqlCall(corpusCall{name: "window: block 0", tool: "get_result_block", args: map[string]any{"transfer_id": lastTransfer, "block": 0}},
			"SELECT * FROM readings"),
		sqlCall(corpusCall{name: "page 1", tool: "run_sql", args: iot(map[string]any{"sql": page})},
			page+" LIMIT 100"),
		sqlCall(corpusCall{name: "page 2", tool: "run_sql", args: iot(map[string]any{"sql": page, "cursor": lastCursor})},
			page+" LIMIT 100 OFFSET 100"),
		sqlCall(corpusCall{name: "page 3", tool: "run_sql", args: iot(map[string]any{"sql": page, "cursor": lastCursor})},
			page+" LIMIT 100 OFFSET 200"),
		sqlCall(corpusCall{name: "page 4", tool: "run_sql", args: iot(map[string]any{"sql": page, "cursor": lastCursor})},
			page+" LIMIT 100 OFFSET 300"),
		sqlCall(corpusCall{name: "hourly temperature", tool: "query_time_series", args: series(nil,
			map[string]any{"agg": "avg", "column": "temperature"}, map[string]any{"agg": "min", "column": "temperature"}, map[string]any{"agg": "max", "column": "temperature"})},
			"SELECT date_trunc('hour', ts) AS bucket, avg(temperature), min(temperature), max(temperature) FROM readings GROUP BY 1 ORDER BY 1"),
		sqlCall(corpusCall{name: "hourly count by status", tool: "query_time_series", args: series([]string{"status"}, map[string]any{"agg": "count"})},
			"SELECT date_trunc('hour', ts) AS bucket, status, count(*) FROM readings GROUP BY 1, 2 ORDER BY 1, 2"),
		sqlCall(corpusCall{name: "explain point lookup", tool: "explain", args: iot(map[string]any{"sql": "SELECT * FROM readings WHERE id = 4242"})},
			"EXPLAIN SELECT * FROM readings WHERE id = 4242"),
		sqlCall(corpusCall{name: "explain avg per device", tool: "explain", args: iot(map[string]any{"sql": "SELECT device_id, avg(temperature) FROM readings GROUP BY device_id"})},
			"EXPLAIN SELECT device_id, avg(temperature) FROM readings GROUP BY device_id"),
	}
}

// reply is what one call gave back: text is what the model reads (every
// text content item, and each resource link's URI, name and title),
// structured the JSON of structuredContent, which is for programs.
type reply struct {
	name             string
	text, structured int
	failed           bool
}

// measure counts one tool result as the model and a program see it.
func measure(res *mcpsdk.CallToolResult) reply {
	var r reply
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcpsdk.TextContent:
			r.text += len(c.Text)
		case *mcpsdk.ResourceLink:
			r.text += len(c.URI) + len(c.Name) + len(c.Title)
		}
	}
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		r.structured = len(raw)
	}
	r.failed = res.IsError
	return r
}

// TestAgentCorpus (make bench, LAKEGATE_BENCH_CORPUS=1) measures what an
// agent receives for a fixed corpus of calls: from lakegate (the real
// server, as the binary runs it, with a block store), and, when
// integration/js holds it (npm ci --include=dev), from DBHub's defaults on
// the same database over stdio. It fails if a lakegate reply's text is
// over the answer budget.
func TestAgentCorpus(t *testing.T) {
	if os.Getenv("LAKEGATE_BENCH_CORPUS") == "" {
		t.Skip("LAKEGATE_BENCH_CORPUS not set (make bench sets it)")
	}
	corpus := agentCorpus()
	e := start(t, envOptions{blocks: &blocktransport.Options{}})
	cs := e.connectHTTP(t, token("agent", "reader"), "", nil)
	var lake []reply
	var cursor, transfer string
	for _, c := range corpus {
		args := map[string]any{}
		for k, v := range c.args {
			switch v {
			case lastCursor:
				v = cursor
			case lastTransfer:
				v = transfer
			}
			args[k] = v
		}
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: c.tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r := measure(res)
		r.name = c.name
		if r.failed {
			t.Errorf("%s: %s", c.name, textOf(res))
		}
		if r.text > mcp.DefaultAnswerChars {
			t.Errorf("%s: %d characters of text, over the answer budget of %d", c.name, r.text, mcp.DefaultAnswerChars)
		}
		var sc struct {
			NextCursor string `json:"next_cursor"`
			Transfer   *struct {
				ID string `json:"transfer_id"`
			} `json:"transfer"`
		}
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &sc)
		cursor = sc.NextCursor
		if sc.Transfer != nil {
			transfer = sc.Transfer.ID
		}
		lake = append(lake, r)
	}
	report(t, "lakegate", lake)

	hub, version := dbhubSession(t)
	if hub == nil {
		return
	}
	var replies []reply
	for _, c := range corpus {
		res, err := hub.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: c.dbhubTool, Arguments: c.dbhubArgs})
		if err != nil {
			t.Fatalf("DBHub %s: %v", c.name, err)
		}
		r := measure(res)
		r.name = c.name
		if r.failed {
			t.Errorf("DBHub %s: %s", c.name, textOf(res))
		}
		replies = append(replies, r)
	}
	report(t, "DBHub "+version, replies)
}

// dbhubSession starts DBHub (integration/js/node_modules/.bin/dbhub, on the
// Node 22 there) over stdio with its defaults on the test database, as
// the same least-privileged login lakegate uses; nil when it is not
// installed.
func dbhubSession(t *testing.T) (*mcpsdk.ClientSession, string) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(jsDir, "node_modules", ".bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "dbhub")); err != nil {
		t.Log("corpus: DBHub is not installed (npm ci --include=dev --prefix integration/js): lakegate measured alone")
		return nil, ""
	}
	var stderr testutil.Buffer
	cmd := exec.Command(filepath.Join(bin, "dbhub"), "--transport", "stdio", "--dsn", appURL)
	cmd.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "NO_COLOR=1"}
	cmd.Stderr = &stderr
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "lakegate-it", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to DBHub: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("DBHub stderr:\n%s", stderr.String())
		}
	})
	return cs, cs.InitializeResult().ServerInfo.Version
}

// report prints one line a call and the summary lines (prefixed
// "corpus:", which make bench keeps).
func report(t *testing.T, server string, replies []reply) {
	t.Helper()
	t.Logf("%-28s %10s %12s", server, "text", "structured")
	var texts []int
	total, structured, over := 0, 0, 0
	for _, r := range replies {
		t.Logf("%-28s %10d %12d", r.name, r.text, r.structured)
		texts = append(texts, r.text)
		total += r.text
		structured += r.structured
		if r.text > mcp.DefaultAnswerChars {
			over++
		}
	}
	slices.Sort(texts)
	n := len(texts)
	median := (texts[(n-1)/2] + texts[n/2]) / 2
	t.Logf("corpus: %s, %d calls: largest %s, median %s, total %s characters of text (structuredContent %s); %d over the answer budget of %s",
		server, n, thousands(texts[n-1]), thousands(median), thousands(total), thousands(structured), over, thousands(mcp.DefaultAnswerChars))
}

// thousands writes n with comma separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
