// Command sdkfloor is the floor lakegate's CPU figures are set beside: a
// bare go-sdk server with one run_sql tool that runs the statement
// through pgx (extended protocol, text results, every row read) and
// answers the text lakegate answered for the same statement (read from
// the JSON object of statements to texts in the file FLOOR_ANSWERS; the
// rows as CSV for a statement it lacks), with no auth, limits,
// validation or logging. It serves legacy HTTP+SSE at /mcp/sse and
// Streamable HTTP at /mcp, like lakegate, and GET /allocs answers the
// bytes the process has allocated so far.
//
// Usage: sdkfloor serve, with LAKEGATE_LISTEN (host:port) and
// FLOOR_DATABASE_URL. It logs the line lakegate's tests wait for.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/metrics"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type runSQL struct {
	Database string `json:"database"`
	SQL      string `json:"sql"`
	Params   []any  `json:"params,omitempty"`
	MaxRows  int    `json:"max_rows,omitempty"`
}

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("FLOOR_DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	answers := map[string]string{}
	if f := os.Getenv("FLOOR_ANSWERS"); f != "" {
		b, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(b, &answers)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	server := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "sdkfloor", Version: "1"}, nil)
	mcpsdk.AddTool(server, &mcpsdk.Tool{Name: "run_sql", Description: "Run one SELECT"},
		func(ctx context.Context, _ *mcpsdk.CallToolRequest, in runSQL) (*mcpsdk.CallToolResult, any, error) {
			text, known := answers[in.SQL]
			rows, err := query(ctx, pool, in, !known)
			if err != nil {
				return nil, nil, err
			}
			if !known {
				text = rows
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: text}}}, nil, nil
		})
	get := func(*http.Request) *mcpsdk.Server { return server }
	mux := http.NewServeMux()
	mux.Handle("/mcp/sse", mcpsdk.NewSSEHandler(get, nil))
	mux.Handle("/mcp", mcpsdk.NewStreamableHTTPHandler(get, nil))
	mux.HandleFunc("GET /allocs", func(w http.ResponseWriter, _ *http.Request) {
		s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
		metrics.Read(s)
		fmt.Fprint(w, s[0].Value.Uint64())
	})
	l, err := net.Listen("tcp", os.Getenv("LAKEGATE_LISTEN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "{\"msg\":\"lakegate listening\",\"url\":\"http://%s\"}\n", l.Addr())
	fmt.Fprintln(os.Stderr, http.Serve(l, mux))
}

// query runs in.SQL and reads every row; with csv it writes them as CSV
// text: a header, then the values as PostgreSQL's text format gives them,
// quoted where CSV needs.
func query(ctx context.Context, pool *pgxpool.Pool, in runSQL, csv bool) (string, error) {
	args := append([]any{pgx.QueryResultFormats{pgx.TextFormatCode}}, in.Params...)
	rows, err := pool.Query(ctx, in.SQL, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b []byte
	for i, f := range rows.FieldDescriptions() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCSV(b, []byte(f.Name))
	}
	b = append(b, '\n')
	n := 0
	for rows.Next() {
		if !csv {
			n++
			continue
		}
		for i, v := range rows.RawValues() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCSV(b, v)
		}
		b = append(b, '\n')
		n++
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	b = append(b, "\n("...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, " rows)"...)
	return string(b), nil
}

func appendCSV(b, v []byte) []byte {
	quote := false
	for _, c := range v {
		if c == ',' || c == '"' || c == '\n' || c == '\r' {
			quote = true
			break
		}
	}
	if !quote {
		return append(b, v...)
	}
	b = append(b, '"')
	for _, c := range v {
		if c == '"' {
			b = append(b, '"')
		}
		b = append(b, c)
	}
	return append(b, '"')
}
