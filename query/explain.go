package query

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/lakegate/lakegate"
)

// maxPlanLines and maxPlanBytes bound a plan read back.
const (
	maxPlanLines = 10000
	maxPlanBytes = 8 << 20
)

// Plan is the query plan of one statement.
type Plan struct {
	Database string  `json:"database"`
	Dialect  Dialect `json:"dialect"`
	// Format is "text" or "json".
	Format  string `json:"format"`
	Analyze bool   `json:"analyze"`
	// Plan is the plan: one string for text, the database's JSON for json
	// (PostgreSQL's EXPLAIN document; for SQLite a list of
	// {"id", "parent", "detail"} steps of EXPLAIN QUERY PLAN).
	Plan      any    `json:"plan"`
	SQL       string `json:"sql"`
	ElapsedMS int64  `json:"elapsed_ms"`
}

// Explain returns the plan of sqlText on database db without running it,
// or (analyze, PostgreSQL only, callers with the admin role) running it.
// The statement must pass validate.Check first (one read-only SELECT), and
// the EXPLAIN goes through the executor's path: a read-only transaction
// with the statement timeout, rolled back (PostgreSQL), or the read-only
// connection (SQLite: EXPLAIN QUERY PLAN). format is "text" (default) or
// "json".
func (e *Engine) Explain(ctx context.Context, c lakegate.Caller, db, sqlText string, analyze bool, format string) (*Plan, error) {
	start := time.Now()
	format = strings.ToLower(strings.TrimSpace(format))
	if format == "" {
		format = "text"
	}
	if format != "text" && format != "json" {
		return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("unknown plan format %q", format), Hint: `format is "text" or "json"`}
	}
	if analyze && !c.HasRole(lakegate.RoleAdmin) {
		return nil, &lakegate.Error{Kind: lakegate.KindForbidden, Message: "explain with analyze runs the statement and needs the admin role",
			Hint: "ask for the plan without analyze"}
	}
	// The statement is prepared as run_sql prepares it (access, the
	// validator, the role it runs as); only the text that runs differs.
	s, err := e.PrepareSQL(ctx, c, SQLRequest{Database: db, SQL: sqlText})
	if err != nil {
		return nil, err
	}
	text := trimSQL(sqlText)
	d := s.src.dialect()
	p := &Plan{Database: db, Dialect: d, Format: format, Analyze: analyze, SQL: text}
	s.Limit, s.hash, s.recap = maxPlanLines, "", nil
	if d == SQLite {
		if analyze {
			return nil, &lakegate.Error{Kind: lakegate.KindValidation, Message: "analyze is available on PostgreSQL databases only",
				Hint: "ask for the plan without analyze"}
		}
		s.text = "EXPLAIN QUERY PLAN " + text
	} else {
		opts := "FORMAT " + strings.ToUpper(format)
		if analyze {
			opts = "ANALYZE, " + opts
		}
		s.text = "EXPLAIN (" + opts + ") " + text
	}
	_, rows, err := Collect(ctx, s, maxPlanBytes)
	if err != nil {
		return nil, err
	}
	if d == SQLite {
		p.Plan = sqlitePlan(rows, format)
	} else {
		p.Plan = pgPlan(rows, format)
	}
	p.ElapsedMS = time.Since(start).Milliseconds()
	return p, nil
}

// pgPlan joins the rows of EXPLAIN: text lines, or the one JSON document.
func pgPlan(rows [][]any, format string) any {
	if format == "json" && len(rows) == 1 && len(rows[0]) == 1 {
		switch x := rows[0][0].(type) {
		case json.RawMessage:
			return x
		case string:
			if json.Valid([]byte(x)) {
				return json.RawMessage(x)
			}
		}
	}
	lines := make([]string, 0, len(rows))
	for _, r := range rows {
		if len(r) > 0 {
			lines = append(lines, fmt.Sprint(r[0]))
		}
	}
	return strings.Join(lines, "\n")
}

// planStep is one row of SQLite's EXPLAIN QUERY PLAN.
type planStep struct {
	ID     int64  `json:"id"`
	Parent int64  `json:"parent"`
	Detail string `json:"detail"`
}

// sqlitePlan renders EXPLAIN QUERY PLAN rows (id, parent, notused,
// detail) as steps, or as an indented tree like the sqlite3 shell's.
func sqlitePlan(rows [][]any, format string) any {
	steps := make([]planStep, 0, len(rows))
	for _, r := range rows {
		if len(r) < 4 {
			continue
		}
		id, _ := r[0].(int64)
		parent, _ := r[1].(int64)
		steps = append(steps, planStep{ID: id, Parent: parent, Detail: fmt.Sprint(r[3])})
	}
	if format == "json" {
		return steps
	}
	depth := map[int64]int{}
	var b strings.Builder
	b.WriteString("QUERY PLAN")
	for _, s := range steps {
		d := depth[s.Parent] + 1
		depth[s.ID] = d
		b.WriteString("\n" + strings.Repeat("  ", d-1) + "|--" + s.Detail)
	}
	return b.String()
}
