package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lakegate/lakegate/jobs"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// callJSON calls a tool and decodes its structured content into out. It
// fails the test on a protocol error; a tool error is returned.
// jobOf is the job an export answered with, if it did.
func jobOf(t *testing.T, res *mcpsdk.CallToolResult) (jobs.Status, bool) {
	t.Helper()
	var out struct {
		Mode string
		Job  jobs.Status
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil || out.Mode != "job" {
		return jobs.Status{}, false
	}
	return out.Job, true
}

// awaitJob asks job_status, with the longest wait, until job id has
// ended, and returns the last answer and the job's status in it.
func awaitJob(t *testing.T, cs *mcpsdk.ClientSession, id string) (*mcpsdk.CallToolResult, jobs.Status) {
	t.Helper()
	for {
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "job_status", Arguments: map[string]any{"job_id": id, "wait_s": 25}})
		if err != nil || res.IsError {
			t.Fatalf("job_status %s: %v %v", id, res, err)
		}
		var out struct{ Job jobs.Status }
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &out)
		if out.Job.State != jobs.Running {
			return res, out.Job
		}
	}
}

func callJSON(t *testing.T, cs *mcpsdk.ClientSession, tool string, args map[string]any, out any) *mcpsdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	if job, ok := jobOf(t, res); ok && !res.IsError {
		// An export: its job's answer once done.
		var st jobs.Status
		if res, st = awaitJob(t, cs, job.ID); st.State != jobs.Done {
			t.Fatalf("%s: the export job ended %s: %s", tool, st.State, res.Content[0].(*mcpsdk.TextContent).Text)
		}
	}
	if res.IsError || out == nil {
		return res
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("%s: structured content %s: %v", tool, raw, err)
	}
	// Query results carry their rows once: as CSV in the text content
	// (all of them inline, a preview with blocks), never in the structured
	// content, which describes them. The rows are read back from the CSV,
	// typed by the columns, into out's "rows".
	text := res.Content[0].(*mcpsdk.TextContent).Text
	var a, b any
	_ = json.Unmarshal(raw, &a)
	if m, ok := a.(map[string]any); ok && m["columns"] != nil && m["mode"] != nil {
		if m["rows"] != nil {
			t.Errorf("%s: structured content repeats the rows", tool)
		}
		rows, footer := parseResultText(t, text, m["columns"].([]any))
		if !strings.HasPrefix(footer, fmt.Sprintf("# rows: %v", m["row_count"])) {
			t.Errorf("%s: text %q: want a header, rows and a footer with the row count", tool, text)
		}
		m["rows"] = rows
		raw, _ = json.Marshal(m)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			t.Fatalf("%s: %s: %v", tool, raw, err)
		}
		t.Logf("%s: text %d bytes, structured JSON %d bytes", tool, len(text), len(raw))
		return res
	}
	if err := json.Unmarshal([]byte(text), &b); err != nil {
		t.Fatalf("%s: text content is not JSON: %v", tool, err)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("%s: text content differs from structured content", tool)
	}
	return res
}

// parseResultText reads a query tool's text: a CSV header, the rows, then
// footer lines starting with "# ". An unquoted empty field is NULL; the
// cells of numeric and boolean columns become JSON numbers and booleans,
// the rest stay strings.
func parseResultText(t *testing.T, text string, cols []any) (rows [][]any, footer string) {
	t.Helper()
	var fields []*string
	var records [][]*string
	i := 0
	for i < len(text) {
		if len(fields) == 0 && strings.HasPrefix(text[i:], "# ") {
			footer = text[i:]
			break
		}
		var f strings.Builder
		quoted := false
		if text[i] == '"' {
			quoted = true
			i++
			for i < len(text) {
				if text[i] == '"' {
					if i+1 < len(text) && text[i+1] == '"' {
						f.WriteByte('"')
						i += 2
						continue
					}
					i++
					break
				}
				f.WriteByte(text[i])
				i++
			}
		} else {
			for i < len(text) && text[i] != ',' && text[i] != '\n' {
				f.WriteByte(text[i])
				i++
			}
		}
		v := f.String()
		if !quoted && v == "" {
			fields = append(fields, nil)
		} else {
			fields = append(fields, &v)
		}
		if i < len(text) && text[i] == ',' {
			i++
			continue
		}
		i++ // the newline
		records = append(records, fields)
		fields = nil
	}
	if len(records) == 0 {
		t.Fatalf("text %q: no CSV header", text)
	}
	for _, rec := range records[1:] {
		if len(rec) != len(cols) {
			t.Fatalf("text %q: a row of %d fields, want %d", text, len(rec), len(cols))
		}
		row := make([]any, len(rec))
		for j, f := range rec {
			if f == nil {
				continue
			}
			c, _ := cols[j].(map[string]any)
			switch {
			case c["json"] != nil && json.Valid([]byte(*f)) && (*f)[0] != '"':
				row[j] = json.Number(*f)
			case c["type"] == "bool" || c["type"] == "boolean":
				row[j] = *f == "true"
			default:
				row[j] = *f
			}
		}
		rows = append(rows, row)
	}
	return rows, footer
}

type result struct {
	Columns []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"columns"`
	Rows      [][]any `json:"rows"`
	RowCount  int     `json:"row_count"`
	Truncated bool    `json:"truncated"`
	SQL       string  `json:"sql"`
}

func TestMCPToolsOverSSE(t *testing.T) {
	e := start(t, envOptions{})
	cs := e.connect(t, token("alice", "reader"))
	ctx := t.Context()

	if got := cs.InitializeResult().ServerInfo.Name; got != "lakegate" {
		t.Errorf("server name: got %q, want lakegate", got)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		// cancel_job changes nothing but the caller's own job.
		if tool.Annotations == nil || tool.Annotations.ReadOnlyHint != (tool.Name != "cancel_job") {
			t.Errorf("tool %s: want readOnlyHint %v", tool.Name, tool.Name != "cancel_job")
		}
		if tool.OutputSchema == nil {
			t.Errorf("tool %s: want an output schema", tool.Name)
		}
	}
	slices.Sort(names)
	want := []string{"cancel_job", "describe_table", "explain", "get_result_block", "job_status", "list_databases", "list_tables", "query", "query_time_series", "run_sql", "tail"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools: got %v, want %v", names, want)
	}

	t.Run("list_databases", func(t *testing.T) {
		var out struct {
			Databases []struct{ Name, Dialect string } `json:"databases"`
		}
		callJSON(t, cs, "list_databases", nil, &out)
		if len(out.Databases) != 1 || out.Databases[0].Name != "iot" || out.Databases[0].Dialect != "postgres" {
			t.Errorf("got %+v, want one postgres database iot", out.Databases)
		}
	})

	t.Run("list_tables", func(t *testing.T) {
		var out struct {
			Tables []struct {
				Name        string `json:"name"`
				RowEstimate int64  `json:"row_estimate"`
			} `json:"tables"`
		}
		callJSON(t, cs, "list_tables", map[string]any{"database": "iot"}, &out)
		got := map[string]int64{}
		for _, tb := range out.Tables {
			got[tb.Name] = tb.RowEstimate
		}
		if got["devices"] != 50 || got["readings"] != 5000 {
			t.Errorf("got %v, want devices=50 readings=5000 (analyzed estimates)", got)
		}
	})

	t.Run("describe_table", func(t *testing.T) {
		var out struct {
			Name    string `json:"name"`
			Columns []struct {
				Name     string `json:"name"`
				Type     string `json:"type"`
				Nullable bool   `json:"nullable"`
			} `json:"columns"`
			PrimaryKey  []string `json:"primary_key"`
			ForeignKeys []struct {
				Columns  []string `json:"columns"`
				RefTable string   `json:"ref_table"`
			} `json:"foreign_keys"`
		}
		callJSON(t, cs, "describe_table", map[string]any{"database": "iot", "table": "readings"}, &out)
		rows, err := e.pool.Query(ctx, `SELECT column_name, is_nullable = 'YES' FROM information_schema.columns
			WHERE table_name = 'readings' ORDER BY ordinal_position`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		i := 0
		for rows.Next() {
			var name string
			var nullable bool
			if err := rows.Scan(&name, &nullable); err != nil {
				t.Fatal(err)
			}
			if i >= len(out.Columns) || out.Columns[i].Name != name || out.Columns[i].Nullable != nullable {
				t.Errorf("column %d: got %+v, want %s nullable=%v", i, out.Columns, name, nullable)
			}
			i++
		}
		if i != len(out.Columns) {
			t.Errorf("got %d columns, want %d", len(out.Columns), i)
		}
		if !slices.Equal(out.PrimaryKey, []string{"id"}) {
			t.Errorf("primary key: got %v, want [id]", out.PrimaryKey)
		}
		if len(out.ForeignKeys) != 1 || out.ForeignKeys[0].RefTable != "devices" {
			t.Errorf("foreign keys: got %+v, want readings.device_id -> devices", out.ForeignKeys)
		}
	})

	t.Run("query", func(t *testing.T) {
		var out result
		callJSON(t, cs, "query", map[string]any{
			"database": "iot", "table": "readings",
			"columns": []string{"id", "device_id", "status"},
			"filters": []map[string]any{
				{"column": "device_id", "op": "=", "value": 7},
				{"column": "status", "op": "in", "value": []string{"warn", "fail"}},
			},
			"order_by": []map[string]any{{"column": "id", "desc": true}},
			"max_rows": 10,
		}, &out)
		rows, err := e.pool.Query(ctx, `SELECT id, device_id, status FROM readings
			WHERE device_id = 7 AND status IN ('warn','fail') ORDER BY id DESC LIMIT 11`)
		if err != nil {
			t.Fatal(err)
		}
		var want [][]any
		for rows.Next() {
			var id int64
			var dev int32
			var status string
			if err := rows.Scan(&id, &dev, &status); err != nil {
				t.Fatal(err)
			}
			want = append(want, []any{float64(id), float64(dev), status})
		}
		rows.Close()
		if len(want) != 11 {
			t.Fatalf("fixture: got %d rows, want 11", len(want))
		}
		if !out.Truncated || out.RowCount != 10 || fmt.Sprint(out.Rows) != fmt.Sprint(want[:10]) {
			t.Errorf("got %d rows truncated=%v %v, want 10 rows truncated %v", out.RowCount, out.Truncated, out.Rows, want[:10])
		}
		if !strings.Contains(out.SQL, "$1") {
			t.Errorf("built SQL %q: want bind parameters", out.SQL)
		}
	})

	t.Run("run_sql", func(t *testing.T) {
		var out result
		sql := `SELECT d.site, count(*) AS n, round(avg(r.temperature)::numeric, 3) AS avg_t
			FROM readings r JOIN devices d ON d.id = r.device_id
			WHERE r.ts >= $1 GROUP BY d.site ORDER BY d.site`
		callJSON(t, cs, "run_sql", map[string]any{"database": "iot", "sql": sql, "params": []any{"2025-01-01T01:00:00Z"}}, &out)
		rows, err := e.pool.Query(ctx, sql, "2025-01-01T01:00:00Z")
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for rows.Next() {
			var site string
			var n int64
			var avg float64
			if err := rows.Scan(&site, &n, &avg); err != nil {
				t.Fatal(err)
			}
			want = append(want, fmt.Sprintf("%s %d %g", site, n, avg))
		}
		rows.Close()
		var got []string
		for _, r := range out.Rows {
			avg, err := r[2].(json.Number).Float64()
			if err != nil {
				t.Fatalf("avg %v: want a JSON number", r[2])
			}
			got = append(got, fmt.Sprintf("%v %v %g", r[0], r[1], avg))
		}
		if !slices.Equal(got, want) || out.Truncated {
			t.Errorf("got %v (truncated %v), want %v", got, out.Truncated, want)
		}
	})

	t.Run("errors are results", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			tool string
			args map[string]any
			kind string
		}{
			{"write refused", "run_sql", map[string]any{"database": "iot", "sql": "DELETE FROM readings"}, "validation_error"},
			{"stacked statements", "run_sql", map[string]any{"database": "iot", "sql": "SELECT 1; DROP TABLE readings"}, "validation_error"},
			{"unknown database", "list_tables", map[string]any{"database": "nope"}, "not_found"},
			{"unknown table", "query", map[string]any{"database": "iot", "table": "reading"}, "validation_error"},
			{"unknown column", "query", map[string]any{"database": "iot", "table": "readings", "columns": []string{"temprature"}}, "validation_error"},
			{"unknown argument", "list_tables", map[string]any{"database": "iot", "schema": "x"}, "validation_error"},
			{"missing argument", "run_sql", map[string]any{"database": "iot"}, "validation_error"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res := callJSON(t, cs, tc.tool, tc.args, nil)
				if !res.IsError {
					t.Fatalf("got a result, want an isError result of kind %s", tc.kind)
				}
				var body struct {
					Error struct{ Kind, Message string } `json:"error"`
				}
				text := res.Content[0].(*mcpsdk.TextContent).Text
				if err := json.Unmarshal([]byte(text), &body); err != nil {
					t.Fatalf("error text %q: %v", text, err)
				}
				if body.Error.Kind != tc.kind || body.Error.Message == "" {
					t.Errorf("got %+v, want kind %s with a message", body.Error, tc.kind)
				}
			})
		}
		var n int
		if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM readings").Scan(&n); err != nil || n != 5000 {
			t.Errorf("readings after hostile calls: got %d (%v), want 5000", n, err)
		}
	})

	st := e.plugin.Status()
	if st.ToolCalls["run_sql"].Calls < 3 || st.ToolCalls["run_sql"].Errors < 2 || st.Sessions["sse"] != 1 {
		t.Errorf("status: got %+v, want run_sql calls and errors counted and one open session", st)
	}
}
