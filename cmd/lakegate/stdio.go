package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/mcp"
)

// newStdioCommand is `lakegate stdio`: the MCP tools over standard input
// and output for local clients (Claude Desktop style). There is no HTTP
// and no token: every call runs as the identity given by --sub and --role.
// Logs go to stderr only; stdout carries nothing but MCP messages.
func newStdioCommand(configFile *string, stderr io.Writer, environ []string) *cobra.Command {
	var sub, group string
	var roles []string
	cmd := &cobra.Command{
		Use:   "stdio",
		Short: "Serve the MCP tools over standard input/output (for local MCP clients)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(*configFile, environ)
			if err != nil {
				return err
			}
			for _, r := range roles {
				if _, ruled := cfg.Access[r]; !validRole(r) && !ruled {
					return errors.New("--role " + r + ": want reader, writer, admin or a role of the access setting")
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// A write to a stdout whose reader is gone must fail with
			// EPIPE (the session then ends, cancelling its calls), not
			// kill the process with SIGPIPE as Go does for fd 1 and 2.
			signal.Ignore(syscall.SIGPIPE)
			t := &mcp.StdioTransport{In: os.Stdin, Out: os.Stdout, Drain: stdioDrain(cfg)}
			return runStdio(ctx, cfg, lakegate.Caller{Subject: sub, Roles: roles}, group, t, stderr)
		},
	}
	cmd.Flags().StringVar(&sub, "sub", "stdio", "subject the calls run as (logs, database role mapping)")
	cmd.Flags().StringSliceVar(&roles, "role", []string{lakegate.RoleReader}, "roles the calls hold")
	cmd.Flags().StringVar(&group, "group", "", "serve only this tool group of mcp_config_dir's tools.json (default: every tool)")
	return cmd
}

// stdioDrain is how long `lakegate stdio` goes on answering the requests
// it read once its input has ended: as long as a tool call may take (its
// wait for a worker and its statement timeout), so that piped requests get
// their answers; a client that is gone, or SIGTERM, cancels them at once.
func stdioDrain(cfg config.Config) time.Duration {
	return time.Duration(cfg.WorkerWait) + time.Duration(cfg.StatementTimeout)
}

func validRole(r string) bool {
	for _, known := range lakegate.Roles {
		if r == known {
			return true
		}
	}
	return false
}

// runStdio serves one MCP session over t until the client closes its input
// (and its answers are written), the client is gone, or ctx ends.
func runStdio(ctx context.Context, cfg config.Config, caller lakegate.Caller, group string, t mcpsdk.Transport, stderr io.Writer) error {
	log := newLogger(cfg, stderr)
	defer tuneGC(cfg, log)()
	if err := useDemo(ctx, &cfg, log); err != nil {
		return err
	}
	// A stdio process spools blocks in a directory of its own: a server
	// may be using the configured one.
	spool, err := os.MkdirTemp("", "lakegate-stdio-blocks-")
	if err != nil {
		return fmt.Errorf("block spool: %w", err)
	}
	defer os.RemoveAll(spool)
	cfg.MCPBlockDir = spool
	_, plugin, closeAll, err := openPlugin(ctx, cfg, log, false, nil, nil, nil)
	if err != nil {
		return err
	}
	defer func() {
		// The plugin's drain gets 5 s; the block store and the engine are
		// released in full.
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = plugin.Shutdown(cctx)
		closeAll(context.WithoutCancel(ctx))
	}()
	err = plugin.ServeStdio(ctx, t, caller, group)
	if errors.Is(err, context.Canceled) {
		return nil // interrupted by a signal: a normal end
	}
	return err
}
