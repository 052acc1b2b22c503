package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/tools"
)

// maxCompletions bounds the values of one completion/complete answer (the
// protocol's limit is 100).
const maxCompletions = 100

// toolGuidance is the text of the tool-descriptions prompt: which tool for
// which question, the limits, and how results come back.
const toolGuidance = `You are connected to lakegate, a read-only SQL data server. Use its tools this way:

1. list_databases: which databases exist and their dialect (postgres or sqlite). Start here.
2. list_tables (database): tables and views with estimated row counts. Use the estimates to judge cost before querying.
3. describe_table (database, table): columns with types and nullability, primary and foreign keys. Read it before writing SQL; never guess column names.
4. query (database, table, columns, filters, order_by, max_rows): rows of one table without writing SQL. Filters are ANDed; values are bound parameters. Prefer it for simple lookups.
5. run_sql (database, sql, params, max_rows): one read-only SELECT (joins, aggregates, CTEs) in the database's dialect. Put values in params ($1, $2 on postgres; ? on sqlite), never inside the SQL text.

Limits: every query is read-only, runs under a statement timeout, and returns at most max_rows rows (100 by default, 0 for all); "truncated" means more rows exist, so aggregate in SQL or narrow the filters rather than raising max_rows. The rows come once, as CSV text (a header, the rows, then a "# rows: N" line); the structured content describes them (columns with types, row_count, truncated, next_cursor, mode). A result past the answer budget (about 40,000 characters) comes back as the rows that fit, a profile of every row and a transfer of blocks (read rows from it with get_result_block's offset and limit, or resources/read); long cells in a preview are cut and marked. export: true sends every row to blocks as a job that answers at once: follow it with job_status (wait_s 25: it answers when the job ends), stop it with cancel_job. Failures come back as results with isError and an error object {kind, message, hint}: read the hint and fix the call.

Schemas are also readable as resources: lakegate://databases and lakegate://databases/{db}/tables/{table}/schema.`

// prompts are the plugin's prompts and the completion of their arguments
// (and of the table schema template's) from the engine's databases and
// tables.
type prompts struct {
	engine Engine
	// conformance adds the conformance fixtures' completions.
	conformance bool
}

// register adds the prompts named (promptNames) to server. Their argument
// values complete from the engine's catalog (see complete).
func (p *prompts) register(server *mcpsdk.Server, names []string) {
	dbArg := &mcpsdk.PromptArgument{Name: "database", Description: "Database name from list_databases", Required: true}
	tableArg := &mcpsdk.PromptArgument{Name: "table", Description: "Table name from list_tables", Required: true}
	add := func(pr *mcpsdk.Prompt, h mcpsdk.PromptHandler) {
		if slices.Contains(names, pr.Name) {
			server.AddPrompt(pr, h)
		}
	}
	add(&mcpsdk.Prompt{
		Name:        "tool-descriptions",
		Title:       "How to use lakegate's tools",
		Description: "Guidance for using lakegate's tools well: which tool for which question, limits, result shapes.",
	}, func(context.Context, *mcpsdk.GetPromptRequest) (*mcpsdk.GetPromptResult, error) {
		return userPrompt("How to use lakegate's tools", toolGuidance), nil
	})
	add(&mcpsdk.Prompt{
		Name:        "explore_database",
		Title:       "Explore a database",
		Description: "Survey one database: its tables, their sizes and how they relate.",
		Arguments:   []*mcpsdk.PromptArgument{dbArg},
	}, func(ctx context.Context, req *mcpsdk.GetPromptRequest) (*mcpsdk.GetPromptResult, error) {
		db, err := p.promptDatabase(req.Params.Arguments)
		if err != nil {
			return nil, err
		}
		return userPrompt("Explore database "+db, fmt.Sprintf(
			"Explore the %[1]s database (%[2]s dialect) served by lakegate. Call list_tables with database %[1]q, "+
				"then describe_table for the largest and most connected tables. Summarise what each table holds, "+
				"its approximate size, its keys and how the tables join (foreign keys). Finish with three questions "+
				"this data can answer and the run_sql query for each. Keep queries small: use limits and aggregates.",
			db, p.dialect(db))), nil
	})
	add(&mcpsdk.Prompt{
		Name:        "analyze_table",
		Title:       "Analyze a table",
		Description: "Profile one table: columns, null rates, value ranges and notable patterns.",
		Arguments:   []*mcpsdk.PromptArgument{dbArg, tableArg},
	}, func(ctx context.Context, req *mcpsdk.GetPromptRequest) (*mcpsdk.GetPromptResult, error) {
		db, err := p.promptDatabase(req.Params.Arguments)
		if err != nil {
			return nil, err
		}
		table := req.Params.Arguments["table"]
		if table == "" {
			return nil, fmt.Errorf("argument %q is required", "table")
		}
		return userPrompt("Analyze table "+table, fmt.Sprintf(
			"Analyze the table %[2]s of the %[1]s database (%[3]s dialect) served by lakegate. First call describe_table "+
				"with database %[1]q and table %[2]q. Then, with run_sql and aggregates only (count, count(DISTINCT ...), min, "+
				"max, avg, GROUP BY with a LIMIT), measure the row count, the null rate of each column, the range of "+
				"numeric and time columns and the most common values of text columns. Report anomalies (outliers, "+
				"gaps, duplicates of the primary key) and suggest follow-up queries.",
			db, table, p.dialect(db))), nil
	})
}

func userPrompt(description, text string) *mcpsdk.GetPromptResult {
	return &mcpsdk.GetPromptResult{
		Description: description,
		Messages:    []*mcpsdk.PromptMessage{{Role: "user", Content: &mcpsdk.TextContent{Text: text}}},
	}
}

// promptDatabase checks the database argument of a prompt.
func (p *prompts) promptDatabase(args map[string]string) (string, error) {
	db := args["database"]
	if db == "" {
		return "", fmt.Errorf("argument %q is required", "database")
	}
	if p.dialect(db) == "" {
		return "", fmt.Errorf("unknown database %q; known: %s", db, strings.Join(p.databaseNames(), ", "))
	}
	return db, nil
}

func (p *prompts) dialect(db string) string {
	for _, d := range p.engine.Databases() {
		if d.Name == db {
			return string(d.Dialect)
		}
	}
	return ""
}

func (p *prompts) databaseNames() []string {
	var names []string
	for _, d := range p.engine.Databases() {
		names = append(names, d.Name)
	}
	return names
}

// complete answers completion/complete for the "database" and "table"
// arguments of the prompts and of the table schema resource template:
// names from the engine that start with the typed prefix (case-insensitive).
func (p *prompts) complete(ctx context.Context, req *mcpsdk.CompleteRequest) (*mcpsdk.CompleteResult, error) {
	if p.conformance {
		if res, ok := conformanceComplete(req); ok {
			return res, nil
		}
	}
	arg := req.Params.Argument
	var candidates []string
	caller, _ := lakegate.CallerFrom(ctx)
	switch arg.Name {
	case "database", "db":
		for _, d := range tools.DatabasesFor(p.engine, caller) {
			candidates = append(candidates, d.Name)
		}
	case "table":
		var db string
		if req.Params.Context != nil {
			db = req.Params.Context.Arguments["database"]
			if db == "" {
				db = req.Params.Context.Arguments["db"]
			}
		}
		for _, d := range p.databaseNames() {
			if db != "" && d != db {
				continue
			}
			tables, err := p.engine.Tables(ctx, caller, d)
			if err != nil {
				continue // an unreachable database offers nothing to complete
			}
			for _, t := range tables {
				candidates = append(candidates, t.Name)
			}
		}
	}
	prefix := strings.ToLower(arg.Value)
	var values []string
	for _, c := range candidates {
		if strings.HasPrefix(strings.ToLower(c), prefix) && !slices.Contains(values, c) {
			values = append(values, c)
		}
	}
	slices.Sort(values)
	res := &mcpsdk.CompleteResult{Completion: mcpsdk.CompletionResultDetails{Values: values, Total: len(values)}}
	if len(values) > maxCompletions {
		res.Completion.Values, res.Completion.HasMore = values[:maxCompletions], true
	}
	if res.Completion.Values == nil {
		res.Completion.Values = []string{}
	}
	return res, nil
}
