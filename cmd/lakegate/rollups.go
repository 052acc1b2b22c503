package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// rollupsReport is GET /admin/rollups.
type rollupsReport struct {
	Rollups []struct {
		Database   string `json:"database"`
		Table      string `json:"table"`
		Resolution string `json:"resolution"`
		Rollup     string `json:"rollup"`
		Built      bool   `json:"built"`
		Error      string `json:"error"`
	} `json:"rollups"`
	Builds []rollupBuild `json:"builds"`
}

type rollupBuild struct {
	Database string           `json:"database"`
	Table    string           `json:"table"`
	State    string           `json:"state"`
	TookMS   int64            `json:"took_ms"`
	Rows     map[string]int64 `json:"rows"`
	Error    string           `json:"error"`
}

// rollupPoll is how often build waits between looks at the builds.
const rollupPoll = time.Second

// newRollupsCommand is `lakegate admin rollups status|build`.
func newRollupsCommand(stdout io.Writer, client func() adminClient) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollups",
		Short: "Show the rollups of time series, or build them for the rows already stored",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "List each configured rollup, whether it is built, and the last builds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := client()
			body, err := c.do(cmd.Context(), http.MethodGet, "/admin/rollups")
			if err != nil {
				return c.tls.explain(c.server, err)
			}
			return printRollups(stdout, body)
		},
	})
	var db, table string
	var noWait bool
	build := &cobra.Command{
		Use:   "build",
		Short: "Build rollups from the rows stored (all, one database's, or one table's) and wait for the end",
		Long: "Build rollups from the rows stored: each resolution's table is made (or emptied) and filled in one\n" +
			"transaction, holding off ingests into the table meanwhile. Ingests keep a built rollup from then on;\n" +
			"rows written by other programs reach it at the next build. The server runs the build: leaving this\n" +
			"command (or --no-wait) does not stop it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := client()
			q := url.Values{}
			if db != "" {
				q.Set("database", db)
			}
			if table != "" {
				q.Set("table", table)
			}
			path := "/admin/rollups/build"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			body, err := c.do(cmd.Context(), http.MethodPost, path)
			if err != nil {
				return c.tls.explain(c.server, err)
			}
			var started struct {
				Builds []rollupBuild `json:"builds"`
			}
			if err := json.Unmarshal(body, &started); err != nil {
				return fmt.Errorf("the server's answer is not a build report: %w", err)
			}
			for _, b := range started.Builds {
				fmt.Fprintf(stdout, "building %s.%s\n", b.Database, b.Table)
			}
			if noWait {
				return nil
			}
			for {
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(rollupPoll):
				}
				body, err := c.do(cmd.Context(), http.MethodGet, "/admin/rollups")
				if err != nil {
					return c.tls.explain(c.server, err)
				}
				var rep rollupsReport
				if err := json.Unmarshal(body, &rep); err != nil {
					return fmt.Errorf("the server's answer is not a rollups report: %w", err)
				}
				done, failed := true, 0
				for _, s := range started.Builds {
					for _, b := range rep.Builds {
						if b.Database == s.Database && b.Table == s.Table {
							done = done && b.State != "building"
							if b.State == "failed" {
								failed++
							}
						}
					}
				}
				if done {
					if err := printRollups(stdout, body); err != nil {
						return err
					}
					if failed > 0 {
						return fmt.Errorf("%d of %d builds failed", failed, len(started.Builds))
					}
					return nil
				}
			}
		},
	}
	build.Flags().StringVar(&db, "database", "", "the database whose rollups to build (default: every database)")
	build.Flags().StringVar(&table, "table", "", "the table whose rollups to build (default: every table with rollups)")
	build.Flags().BoolVar(&noWait, "no-wait", false, "start the build and return")
	cmd.AddCommand(build)
	return cmd
}

// printRollups renders GET /admin/rollups.
func printRollups(w io.Writer, body []byte) error {
	var rep rollupsReport
	if err := json.Unmarshal(body, &rep); err != nil {
		return fmt.Errorf("the server's answer is not a rollups report: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATABASE\tTABLE\tRESOLUTION\tROLLUP\tSTATE")
	for _, r := range rep.Rollups {
		state := "not built"
		switch {
		case r.Error != "":
			state = "error: " + r.Error
		case r.Built:
			state = "built"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Database, r.Table, r.Resolution, r.Rollup, state)
	}
	for _, b := range rep.Builds {
		line := fmt.Sprintf("build %s.%s: %s", b.Database, b.Table, b.State)
		if b.State != "building" {
			line += fmt.Sprintf(" in %s", time.Duration(b.TookMS)*time.Millisecond)
		}
		var rows []string
		for res, n := range b.Rows {
			rows = append(rows, fmt.Sprintf("%s %d rows", res, n))
		}
		if len(rows) > 0 {
			line += " (" + strings.Join(slices.Sorted(slices.Values(rows)), ", ") + ")"
		}
		if b.Error != "" {
			line += ": " + b.Error
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
