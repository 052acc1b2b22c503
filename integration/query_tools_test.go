package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp"
)

// customTools is the built-in tools.json plus one operator-declared
// statement.
func customTools(t *testing.T) string {
	t.Helper()
	var doc struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(lakegate.DefaultTools, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Tools = append(doc.Tools, json.RawMessage(`{"name": "device_readings", "description": "Readings of one device since a time",
		"handler": "sql", "database": "iot",
		"statement": "SELECT id, ts, status FROM readings WHERE device_id = $1 AND ts >= $2 AND status <> $3 ORDER BY id",
		"parameters": [{"name": "device_id", "type": "integer", "required": true}, {"name": "since", "type": "timestamp", "required": true},
			{"name": "not_status", "type": "string"}]}`),
		json.RawMessage(`{"name": "slow_count", "description": "A count that takes long", "handler": "sql", "database": "iot",
		"timeout": "300ms", "statement": "SELECT count(*) FROM generate_series(1, $1::bigint)",
		"parameters": [{"name": "n", "type": "integer", "required": true}]}`))
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, mcp.ToolsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pgRows runs sql on the test database and renders the rows as text.
func (e *env) pgRows(t *testing.T, sql string, args ...any) string {
	t.Helper()
	rows, err := e.pool.Query(t.Context(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if ts, ok := v.(time.Time); ok {
				vals[i] = ts.UTC().Format(time.RFC3339)
			}
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(out)
}

func errorKind(t *testing.T, res *mcpsdk.CallToolResult) string {
	t.Helper()
	if !res.IsError {
		t.Fatal("got a result, want an isError result")
	}
	var body struct {
		Error struct{ Kind string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(res.Content[0].(*mcpsdk.TextContent).Text), &body)
	return body.Error.Kind
}

func TestQueryToolsOverSSE(t *testing.T) {
	dir := customTools(t)
	e := start(t, envOptions{plugin: func(o *mcp.Options) { o.ConfigDir = dir }})
	cs := e.connect(t, token("alice", "reader"))

	t.Run("query with aggregates, join and group_by", func(t *testing.T) {
		var out pageResult
		callJSON(t, cs, "query", map[string]any{
			"database": "iot", "table": "readings",
			"columns": []any{"devices.site", map[string]any{"agg": "count", "as": "n"},
				map[string]any{"agg": "max", "column": "temperature", "as": "hi"}},
			"joins":    []any{map[string]any{"table": "devices"}},
			"filters":  []any{map[string]any{"or": []any{map[string]any{"column": "status", "op": "=", "value": "fail"}, map[string]any{"column": "kind", "op": "=", "value": "power"}}}},
			"group_by": []string{"devices.site"},
			"having":   []any{map[string]any{"agg": "count", "op": ">", "value": 100}},
			"order_by": []any{map[string]any{"column": "n", "desc": true}, map[string]any{"column": "site"}},
			"max_rows": 3,
		}, &out)
		want := e.pgRows(t, `SELECT d.site, count(*) AS n, max(r.temperature) FROM readings r JOIN devices d ON d.id = r.device_id
			WHERE r.status = 'fail' OR d.kind = 'power' GROUP BY d.site HAVING count(*) > 100 ORDER BY n DESC, d.site`)
		var full pageResult
		callJSON(t, cs, "query", map[string]any{
			"database": "iot", "table": "readings",
			"columns": []any{"devices.site", map[string]any{"agg": "count", "as": "n"},
				map[string]any{"agg": "max", "column": "temperature", "as": "hi"}},
			"joins":    []any{map[string]any{"table": "devices"}},
			"filters":  []any{map[string]any{"or": []any{map[string]any{"column": "status", "op": "=", "value": "fail"}, map[string]any{"column": "kind", "op": "=", "value": "power"}}}},
			"group_by": []string{"devices.site"},
			"having":   []any{map[string]any{"agg": "count", "op": ">", "value": 100}},
			"order_by": []any{map[string]any{"column": "n", "desc": true}, map[string]any{"column": "site"}},
			"cursor":   cursorOf(t, out),
		}, &full)
		got := fmt.Sprint(append(out.Rows, full.Rows...))
		if !out.Truncated || out.RowCount != 3 || got != want {
			t.Errorf("got %s (first page truncated %v), want %s", got, out.Truncated, want)
		}
	})

	t.Run("query_time_series", func(t *testing.T) {
		var out result
		callJSON(t, cs, "query_time_series", map[string]any{
			"database": "iot", "table": "readings", "time_column": "ts",
			"bucket": map[string]any{"unit": "minute", "count": 5}, "group_by": []string{"status"},
			"aggregates": []any{map[string]any{"agg": "count"}, map[string]any{"agg": "min", "column": "id"}},
			"start":      "2025-01-01T00:00:00Z", "end": "2025-01-01T01:00:00Z",
			"filters": []any{map[string]any{"column": "device_id", "op": "<", "value": 10}},
			"limit":   1000,
		}, &out)
		want := e.pgRows(t, `SELECT date_bin('5 minutes', ts, '2000-01-03'), status, count(*), min(id) FROM readings
			WHERE ts >= '2025-01-01T00:00:00Z' AND ts < '2025-01-01T01:00:00Z' AND device_id < 10 GROUP BY 1, 2 ORDER BY 2, 1`)
		if got := fmt.Sprint(out.Rows); got != want || out.Truncated {
			t.Errorf("got %s\nwant %s", got, want)
		}
		res := callJSON(t, cs, "query_time_series", map[string]any{"database": "iot", "table": "readings", "time_column": "ts",
			"bucket": map[string]any{"unit": "second"}, "start": "2025-01-01T00:00:00Z", "end": "2025-02-01T00:00:00Z"}, nil)
		if k := errorKind(t, res); k != "validation_error" {
			t.Errorf("too many buckets: got %s", k)
		}

		// On a budget: the data's range, a width within max_points, the
		// value summarised, and a silent hour as a gap.
		var budget struct {
			result
			Series struct {
				Bucket struct {
					Unit  string `json:"unit"`
					Count int    `json:"count"`
				} `json:"bucket"`
				Buckets    int `json:"buckets"`
				GapBuckets int `json:"gap_buckets"`
			} `json:"series"`
		}
		res = callJSON(t, cs, "query_time_series", map[string]any{"database": "iot", "table": "readings", "time_column": "ts",
			"values": []string{"temperature"}, "max_points": 50, "filters": []any{
				map[string]any{"column": "device_id", "op": "=", "value": 1},
				map[string]any{"or": []any{map[string]any{"column": "ts", "op": "<", "value": "2025-01-01T01:00:00Z"},
					map[string]any{"column": "ts", "op": ">=", "value": "2025-01-01T02:00:00Z"}}}}}, &budget)
		text := res.Content[0].(*mcpsdk.TextContent).Text
		if budget.Series.Buckets == 0 || budget.Series.Buckets > 50 || budget.RowCount > 50 || budget.Series.GapBuckets == 0 ||
			!strings.Contains(text, "# buckets: ") || !strings.Contains(text, "gaps (empty buckets)") || !strings.Contains(text, "max_temperature") {
			t.Errorf("on a budget: %+v\n%s", budget.Series, text)
		}
	})

	t.Run("explain", func(t *testing.T) {
		var out struct {
			Plan    any  `json:"plan"`
			Analyze bool `json:"analyze"`
		}
		callJSON(t, cs, "explain", map[string]any{"database": "iot", "sql": "SELECT * FROM readings WHERE id = 42"}, &out)
		if s, _ := out.Plan.(string); !strings.Contains(s, "readings_pkey") {
			t.Errorf("got plan %v", out.Plan)
		}
		callJSON(t, cs, "explain", map[string]any{"database": "iot", "sql": "SELECT count(*) FROM readings", "format": "json"}, &out)
		if _, ok := out.Plan.([]any); !ok {
			t.Errorf("json plan: got %T", out.Plan)
		}
		res := callJSON(t, cs, "explain", map[string]any{"database": "iot", "sql": "SELECT count(*) FROM readings", "analyze": true}, nil)
		if k := errorKind(t, res); k != "forbidden" {
			t.Errorf("analyze as reader: got %s, want forbidden", k)
		}
		admin := e.connect(t, token("root", "admin"))
		callJSON(t, admin, "explain", map[string]any{"database": "iot", "sql": "SELECT count(*) FROM readings", "analyze": true}, &out)
		if s, _ := out.Plan.(string); !strings.Contains(s, "actual time") || !out.Analyze {
			t.Errorf("analyze: got %v", out.Plan)
		}
		res = callJSON(t, admin, "explain", map[string]any{"database": "iot", "sql": "DELETE FROM readings", "analyze": true}, nil)
		if k := errorKind(t, res); k != "validation_error" {
			t.Errorf("analyze of DELETE: got %s", k)
		}
	})

	t.Run("custom tool", func(t *testing.T) {
		var out result
		for _, hostile := range []string{"fail", "x' OR '1'='1", "'; DELETE FROM readings; --"} {
			callJSON(t, cs, "device_readings", map[string]any{"device_id": 7, "since": "2025-01-01T02:00:00Z", "not_status": hostile, "limit": 1000}, &out)
			want := e.pgRows(t, `SELECT id, ts, status FROM readings WHERE device_id = $1 AND ts >= $2 AND status <> $3 ORDER BY id`,
				7, "2025-01-01T02:00:00Z", hostile)
			if got := fmt.Sprint(out.Rows); got != want || out.RowCount == 0 {
				t.Errorf("%q: got %d rows, want %s", hostile, out.RowCount, want[:min(len(want), 200)])
			}
		}
		res := callJSON(t, cs, "device_readings", map[string]any{"device_id": "7; DROP TABLE readings", "since": "2025-01-01T02:00:00Z"}, nil)
		if k := errorKind(t, res); k != "validation_error" {
			t.Errorf("string for integer: got %s", k)
		}
		if got := e.pgRows(t, "SELECT count(*) FROM readings"); got != "[[5000]]" {
			t.Errorf("readings after the calls: %s", got)
		}
	})

	t.Run("custom tool timeout", func(t *testing.T) {
		var out result
		callJSON(t, cs, "slow_count", map[string]any{"n": 1000}, &out)
		if fmt.Sprint(out.Rows) != "[[1000]]" {
			t.Errorf("short run: got %v, want [[1000]]", out.Rows)
		}
		// The tool's own 300ms timeout, not the 30s default, stops this one:
		// with the default the call would outlive the client's 10s wait.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "slow_count", Arguments: map[string]any{"n": 10000000000}})
		if err != nil {
			t.Fatalf("long run: %v (the tool's timeout did not apply)", err)
		}
		if k := errorKind(t, res); k != "timeout" {
			t.Errorf("long run: got %s, want timeout", k)
		}
	})
}

// pageResult is a query result with its paging cursor.
type pageResult struct {
	result
	NextCursor string `json:"next_cursor"`
}

// cursorOf returns the next_cursor of a truncated page.
func cursorOf(t *testing.T, r pageResult) string {
	t.Helper()
	if r.NextCursor == "" {
		t.Fatal("want a next_cursor on a truncated page")
	}
	return r.NextCursor
}
