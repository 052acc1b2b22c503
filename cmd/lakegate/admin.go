package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakegate/lakegate/host"
)

// adminTimeout bounds one admin request.
const adminTimeout = 30 * time.Second

// defaultServer is where admin commands go without --server or
// LAKEGATE_SERVER: the default listen address.
const defaultServer = "http://127.0.0.1:32049"

// newAdminCommand is `lakegate admin mcp enable|disable|status`: the admin
// API of a running server, from the command line. The token comes from
// --token or, so that it stays out of shell history, LAKEGATE_TOKEN. It is
// never printed.
func newAdminCommand(stdout io.Writer, getenv func(string) string) *cobra.Command {
	var (
		server, token string
		tlsf          tlsFlags
		asJSON        bool
	)
	admin := &cobra.Command{
		Use:   "admin",
		Short: "Control a running server (needs an admin token)",
	}
	admin.PersistentFlags().StringVar(&server, "server", "", "server URL (default LAKEGATE_SERVER, else "+defaultServer+")")
	admin.PersistentFlags().StringVar(&token, "token", "", "admin token (default LAKEGATE_TOKEN; prefer it, it stays out of shell history)")
	tlsf.add(admin, true)

	mcpCmd := &cobra.Command{
		Use:   "mcp",
		Short: "Turn the MCP plugin on or off, or show its status",
	}
	mcpCmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the server's JSON status as it is")
	client := func() adminClient {
		return adminClient{server: firstOf(server, getenv("LAKEGATE_SERVER"), defaultServer),
			token: firstOf(token, getenv("LAKEGATE_TOKEN")), tls: tlsf}
	}
	// call sends one admin request and prints its answer: as it is with
	// --json, else through print.
	call := func(method, path string, print func(io.Writer, []byte) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			c := client()
			body, err := c.do(cmd.Context(), method, path)
			if err != nil {
				return tlsf.explain(c.server, err)
			}
			if asJSON {
				var b bytes.Buffer
				if err := json.Indent(&b, body, "", "  "); err != nil {
					return fmt.Errorf("the server's answer is not JSON: %w", err)
				}
				b.WriteByte('\n')
				_, err := b.WriteTo(stdout)
				return err
			}
			return print(stdout, body)
		}
	}
	for _, sub := range []struct{ use, short, method, path string }{
		{"enable", "Turn MCP on (routes answer again)", http.MethodPost, "/admin/mcp/enable"},
		{"disable", "Turn MCP off (open sessions are closed; REST keeps working)", http.MethodPost, "/admin/mcp/disable"},
		{"status", "Show whether MCP is on, its sessions, tool calls and workers", http.MethodGet, "/admin/mcp/status"},
	} {
		mcpCmd.AddCommand(&cobra.Command{Use: sub.use, Short: sub.short, Args: cobra.NoArgs, RunE: call(sub.method, sub.path, printStatus)})
	}
	admin.AddCommand(mcpCmd)

	toolsCmd := &cobra.Command{
		Use:   "tools",
		Short: "Reload the MCP tool declarations (tools.json) of a running server",
	}
	toolsCmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the server's JSON answer as it is")
	toolsCmd.AddCommand(&cobra.Command{
		Use:   "reload",
		Short: "Read mcp_config_dir's tools.json again and serve it (a refused file leaves the tools in use)",
		Long: "Read mcp_config_dir's tools.json again and serve it, as SIGHUP does. Connected sessions are told\n" +
			"the tool list changed. A file that is refused (with its line and reason) leaves the tools in use.\n" +
			"It reloads the server asked; in a cluster each replica also reloads its own file within 2 s of an edit.",
		Args: cobra.NoArgs,
		RunE: call(http.MethodPost, "/admin/mcp/tools/reload", printTools),
	})
	admin.AddCommand(toolsCmd)
	admin.AddCommand(newRollupsCommand(stdout, client))
	return admin
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// adminClient sends admin requests with a bearer token, or a client
// certificate alone (a server with tls_client_cert_auth).
type adminClient struct {
	server, token string
	tls           tlsFlags
}

// do sends one request and returns the body of a 2xx answer. Any other
// answer is an error carrying the server's message. No error holds the
// token.
// serverURL checks the --server URL (http or https, with a host).
func serverURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want a URL such as %s", s, defaultServer)
	}
	return u, nil
}

func (c adminClient) do(ctx context.Context, method, path string) ([]byte, error) {
	if c.token == "" && c.tls.certFile == "" {
		return nil, errors.New("no admin token: set LAKEGATE_TOKEN (or pass --token), or give a client certificate with --cert")
	}
	u, err := serverURL(c.server)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String()+path, nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	tr, err := c.tls.transport(func(tr *http.Transport) { tr.Proxy = http.ProxyFromEnvironment })
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: tr}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return nil, c.redact(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, c.redact(fmt.Errorf("%s %s: reading the answer: %w", method, path, err))
	}
	if resp.StatusCode/100 != 2 {
		msg := serverError(resp.Status, body)
		if resp.StatusCode == http.StatusUnauthorized {
			msg += "; " + tokenHint(u.String())
		}
		return nil, c.redact(fmt.Errorf("%s %s%s: %s", method, u.String(), path, msg))
	}
	return body, nil
}

// tokenHint says, for a token the server at base refused, where a good
// one comes from.
func tokenHint(base string) string {
	return "the server at " + base + " did not take the token: check that --server or LAKEGATE_SERVER names the server " +
		"whose secret signed it (a server started without jwt_secret, as make run starts one, signs with a secret of its own run, " +
		"so its tokens end with it: take the ones it printed at its start, or make one with lakegate token and its LAKEGATE_JWT_SECRET)"
}

// redact removes the token from err's text, should anything have echoed it.
func (c adminClient) redact(err error) error {
	if c.token == "" || !strings.Contains(err.Error(), c.token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), c.token, "[token]"))
}

// serverError renders a non-2xx answer: the server's JSON error when there
// is one, else the status and the start of the body.
func serverError(status string, body []byte) string {
	var e struct {
		Error struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
			Hint    string `json:"hint"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		msg := fmt.Sprintf("%s: %s: %s", status, e.Error.Kind, e.Error.Message)
		if e.Error.Hint != "" {
			msg += " (" + e.Error.Hint + ")"
		}
		return msg
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	if text == "" {
		return status
	}
	return status + ": " + text
}

// printStatus writes an MCP status for people.
func printStatus(w io.Writer, body []byte) error {
	var st host.PluginStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("the server's answer is not an MCP status: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	state := "disabled"
	if st.Enabled {
		state = "enabled"
		if st.Since != nil {
			state += " since " + st.Since.UTC().Format(time.RFC3339)
		}
	}
	fmt.Fprintf(tw, "mcp:\t%s\n", state)
	transports := make([]string, 0, len(st.Sessions))
	for t := range st.Sessions {
		transports = append(transports, t)
	}
	sort.Strings(transports)
	sessions := make([]string, len(transports))
	for i, t := range transports {
		sessions[i] = fmt.Sprintf("%s %d", t, st.Sessions[t])
	}
	fmt.Fprintf(tw, "sessions:\t%s\n", strings.Join(sessions, ", "))
	workers := fmt.Sprintf("%d of %d in use, %d waiting", st.Workers.InUse, st.Workers.Max, st.Workers.Waiting)
	if st.Workers.PoolMax > 0 {
		workers += fmt.Sprintf(" (shared pool: %d of %d in use)", st.Workers.PoolInUse, st.Workers.PoolMax)
	}
	fmt.Fprintf(tw, "workers:\t%s\n", workers)
	if b := st.Blocks; b != nil {
		fmt.Fprintf(tw, "blocks:\t%d transfers, %d blocks, %d bytes; stored now: %d (%d bytes)\n",
			b.Transfers, b.Blocks, b.Bytes, b.StoredNow, b.StoredBytesNow)
	}
	writeTools(tw, st.Tools)
	tools := make([]string, 0, len(st.ToolCalls))
	for name := range st.ToolCalls {
		tools = append(tools, name)
	}
	sort.Strings(tools)
	if len(tools) == 0 {
		fmt.Fprintf(tw, "tool calls:\tnone\n")
	} else {
		fmt.Fprintf(tw, "tool calls:\t\n")
		for _, name := range tools {
			s := st.ToolCalls[name]
			fmt.Fprintf(tw, "  %s\t%d calls, %d errors\n", name, s.Calls, s.Errors)
		}
	}
	return tw.Flush()
}

// printTools writes the tools a reload left served, for people.
func printTools(w io.Writer, body []byte) error {
	var info host.ToolsInfo
	if err := json.Unmarshal(body, &info); err != nil {
		return fmt.Errorf("the server's answer is not a tools report: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "reloaded:\t%s\n", info.Source)
	writeTools(tw, info)
	return tw.Flush()
}

// writeTools writes the tools served at /mcp and each group's.
func writeTools(w io.Writer, info host.ToolsInfo) {
	if info.Source == "" {
		return // a server that does not say
	}
	fmt.Fprintf(w, "tools:\t%d from %s: %s\n", len(info.Tools), info.Source, strings.Join(info.Tools, ", "))
	for _, g := range info.Groups {
		fmt.Fprintf(w, "  /mcp/%s\t%s\n", g.Name, strings.Join(g.Tools, ", "))
	}
}
