package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/server"
)

// connectInfo is what the connection help needs beyond the configuration.
type connectInfo struct {
	base  string // the server's URL
	mcpOn bool   // MCP is enabled now
	demo  bool   // serving the embedded demo database (stdio can too)
}

// printConnectHelp prints tokens signed with the run's generated secret
// and the lines that connect Claude Code, one name per transport so that
// all of them can be added.
func printConnectHelp(w io.Writer, cfg config.Config, ci connectInfo) error {
	secret := []byte(cfg.JWTSecret)
	admin, err := server.NewToken(secret, "admin", lakegate.RoleAdmin, 24*time.Hour)
	if err != nil {
		return err
	}
	reader, err := server.NewToken(secret, "agent", lakegate.RoleReader, 24*time.Hour)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, `
lakegate is running at %[1]s
No LAKEGATE_JWT_SECRET was set: this run signs tokens with a secret made for it (valid 24h, until restart).

  admin token:  %[2]s
  reader token: %[3]s

More tokens: lakegate token signs with LAKEGATE_JWT_SECRET, so export one before starting the server
(export LAKEGATE_JWT_SECRET=$(openssl rand -hex 32)), then: lakegate token --sub NAME --role reader

`, ci.base, admin, reader)
	if !ci.mcpOn {
		fmt.Fprintf(w, `MCP is off: turn it on before connecting over HTTP, now with
  LAKEGATE_TOKEN=%[2]s lakegate admin mcp enable --server %[1]s
or at start with LAKEGATE_MCP_ENABLED=true (make run does).

`, ci.base, admin)
	}
	fmt.Fprintf(w, `Connect Claude Code (Streamable HTTP, legacy SSE, or stdio: add any or all):
  claude mcp add --transport http lakegate %[1]s/mcp --header "Authorization: Bearer %[2]s"
  claude mcp add --transport sse lakegate-sse %[1]s/mcp/sse --header "Authorization: Bearer %[2]s"
`, ci.base, reader)
	if ci.demo {
		if line, ok := stdioConnectLine(cfg); ok {
			fmt.Fprintln(w, "  "+line)
		}
	}
	fmt.Fprintf(w, `
Try the REST API:
  curl -H "Authorization: Bearer %[2]s" %[1]s/rest/databases

`, ci.base, reader)
	return nil
}

// stdioConnectLine adds this binary's stdio server on the same demo
// database; false if the paths cannot be made absolute.
func stdioConnectLine(cfg config.Config) (string, bool) {
	exe, err := os.Executable()
	if err != nil {
		return "", false
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return "", false
	}
	return fmt.Sprintf("claude mcp add lakegate-stdio -e LAKEGATE_DATA_DIR=%s -- %s stdio", shellQuote(dir), shellQuote(exe)), true
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
