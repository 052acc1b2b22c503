package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/mcp"
)

// fetchFlags are the options of `lakegate fetch`.
type fetchFlags struct {
	server, token, out    string
	tls                   tlsFlags
	parallel              int
	http3                 bool
	database, sql, format string
}

// newFetchCommand is `lakegate fetch`: it downloads the blocks of a
// transfer in parallel over HTTP/2 or HTTP/3, checks every block and the
// whole, and writes the result in order. With --sql it first runs the
// statement as an export (run_sql with export: true) over /mcp.
func newFetchCommand(stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	var f fetchFlags
	cmd := &cobra.Command{
		Use:   "fetch [TRANSFER_ID]",
		Short: "Download a large result's blocks in parallel, checking every one",
		Long: "Download the blocks of TRANSFER_ID (from a result's manifest), or with --database and --sql\n" +
			"run one SELECT as an export first. Blocks are fetched in parallel and checked against\n" +
			"their SHA-256; a file given with -o appears only when all of it checks out (standard\n" +
			"output may get a prefix before an error).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0 && f.sql == "":
				return errors.New("what to fetch? give a TRANSFER_ID (from a result's manifest), " +
					"or --database DB --sql \"SELECT ...\" to export a query first; see lakegate fetch --help")
			case len(args) == 1 && f.sql != "":
				return errors.New("give a TRANSFER_ID or --sql (with --database), not both")
			}
			f.server = firstOf(f.server, getenv("LAKEGATE_SERVER"), defaultServer)
			f.token = firstOf(f.token, getenv("LAKEGATE_TOKEN"))
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			return f.tls.explain(f.server, runFetch(cmd.Context(), f, id, stdout, stderr))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.server, "server", "", "server URL (default LAKEGATE_SERVER, else "+defaultServer+")")
	fl.StringVar(&f.token, "token", "", "token (default LAKEGATE_TOKEN; prefer it, it stays out of shell history)")
	fl.StringVarP(&f.out, "output", "o", "-", "file to write (- for standard output)")
	fl.IntVar(&f.parallel, "parallel", blocktransport.DefaultParallel, "blocks fetched at once")
	fl.BoolVar(&f.http3, "http3", false, "fetch over HTTP/3 (QUIC; the server must have TLS)")
	f.tls.add(cmd, false)
	fl.StringVar(&f.database, "database", "", "with --sql: the database")
	fl.StringVar(&f.sql, "sql", "", "run this SELECT as an export, then fetch its blocks")
	fl.StringVar(&f.format, "format", "ndjson", "with --sql: ndjson or csv")
	return cmd
}

func runFetch(ctx context.Context, f fetchFlags, id string, stdout, stderr io.Writer) error {
	if f.parallel < 1 || f.parallel > 64 {
		return fmt.Errorf("--parallel %d: want 1 to 64", f.parallel)
	}
	if _, err := serverURL(f.server); err != nil {
		return err
	}
	// As many idle connections as blocks in flight: over HTTP/1.1 the
	// default two would close and reopen connections between blocks.
	tr, err := f.tls.transport(func(tr *http.Transport) { tr.ForceAttemptHTTP2, tr.MaxIdleConnsPerHost = true, f.parallel })
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: tr}
	defer hc.CloseIdleConnections()
	if f.sql != "" {
		if id, err = startExport(ctx, f, hc, stderr); err != nil {
			return err
		}
	}
	blocksClient := hc
	if f.http3 {
		tlsConf, err := f.tls.config()
		if err != nil {
			return err
		}
		blocksClient = blocktransport.NewHTTP3(tlsConf)
		defer blocktransport.CloseHTTP3(blocksClient)
	}
	c := &blocktransport.Client{BaseURL: strings.TrimSuffix(f.server, "/") + mcp.BlocksPath, DecodeError: lakegate.DecodeError, Token: f.token, HTTP: blocksClient, Parallel: f.parallel}
	var mu sync.Mutex // one line at a time on stderr
	bar := isTerminal(stderr)
	if bar {
		start := time.Now()
		c.Progress = func(done, total int64) {
			mu.Lock()
			drawProgress(stderr, done, total, time.Since(start))
			mu.Unlock()
		}
	}
	c.Retrying = func(r blocktransport.Retry) {
		var se *blocktransport.StatusError
		if errors.As(r.Err, &se) && se.Code == http.StatusTooManyRequests && r.Wait < time.Second {
			return // pacing, not trouble
		}
		what := "manifest"
		if r.Block >= 0 {
			what = fmt.Sprintf("block %d", r.Block)
		}
		mu.Lock()
		defer mu.Unlock()
		if bar {
			fmt.Fprint(stderr, "\r\033[K")
		}
		fmt.Fprintf(stderr, "lakegate fetch: %s: %v; retrying in %.1fs (attempt %d failed)\n", what, r.Err, r.Wait.Seconds(), r.Attempt)
	}
	w, commit, err := output(f.out, stdout)
	if err != nil {
		return err
	}
	m, err := c.Fetch(ctx, id, w)
	if err = commit(err); err != nil {
		return err
	}
	if c.Progress != nil {
		fmt.Fprintln(stderr)
	}
	fmt.Fprintf(stderr, "lakegate fetch: transfer %s: %d rows, %d blocks, %d bytes, sha256 %s\n", m.ID, m.Rows, len(m.Blocks), m.Bytes, m.SHA256)
	return nil
}

// startExport runs f.sql through run_sql with export: true over /mcp and
// returns the transfer id.
func startExport(ctx context.Context, f fetchFlags, hc *http.Client, stderr io.Writer) (string, error) {
	if f.database == "" {
		return "", errors.New("--sql needs --database")
	}
	// The token is added by the transport: never follow a redirect with it.
	var refused atomic.Bool
	authed := &http.Client{Transport: bearerTransport{token: f.token, base: hc.Transport, refused: &refused},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "lakegate-fetch", Version: version}, nil)
	base := strings.TrimSuffix(f.server, "/")
	cs, err := client.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: authed}, nil)
	if err != nil && refused.Load() {
		return "", fmt.Errorf("connect to %s/mcp: %w; %s", base, err, tokenHint(base))
	}
	if err != nil {
		return "", fmt.Errorf("connect to %s/mcp: %w", base, err)
	}
	defer cs.Close()
	start := time.Now()
	var res *mcpsdk.CallToolResult
	for attempt := 1; ; attempt++ {
		res, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{
			"database": f.database, "sql": f.sql, "export": true, "max_rows": 0, "format": f.format}})
		if err != nil {
			return "", fmt.Errorf("run_sql: %w", err)
		}
		if !res.IsError {
			break
		}
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcpsdk.TextContent); ok {
				text = tc.Text
			}
		}
		wait := rateLimitedWait(text)
		if wait <= 0 || attempt >= exportAttempts {
			return "", fmt.Errorf("run_sql: %s", text)
		}
		fmt.Fprintf(stderr, "lakegate fetch: run_sql: rate limited; retrying in %.1fs\n", wait.Seconds())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
	res, err = followJob(ctx, cs, res, stderr)
	if err != nil {
		return "", err
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out struct {
		RowCount int `json:"row_count"`
		Transfer struct {
			ID string `json:"transfer_id"`
		} `json:"transfer"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Transfer.ID == "" {
		return "", errors.New("run_sql: the answer has no transfer")
	}
	fmt.Fprintf(stderr, "lakegate fetch: exported %d rows as transfer %s in %.3fs\n", out.RowCount, out.Transfer.ID, time.Since(start).Seconds())
	return out.Transfer.ID, nil
}

// jobState is what an export's answer says of the job it runs as.
type jobState struct {
	Mode string `json:"mode"`
	Job  struct {
		ID    string `json:"job_id"`
		State string `json:"state"`
		Rows  int64  `json:"rows"`
	} `json:"job"`
}

// followJob waits for the job an export answered with (mode "job") to
// end, asking job_status with the longest wait, and returns the done
// job's answer: the export's. An answer that is no job is returned as it
// is. Interrupted (ctx), the job is cancelled: the command owned it.
func followJob(ctx context.Context, cs *mcpsdk.ClientSession, res *mcpsdk.CallToolResult, stderr io.Writer) (*mcpsdk.CallToolResult, error) {
	var st jobState
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &st); err != nil || st.Mode != "job" {
		return res, nil
	}
	id := st.Job.ID
	for st.Job.State == "running" {
		next, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "job_status", Arguments: map[string]any{"job_id": id, "wait_s": 25}})
		if ctx.Err() != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = cs.CallTool(cctx, &mcpsdk.CallToolParams{Name: "cancel_job", Arguments: map[string]any{"job_id": id}})
			cancel()
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("job_status: %w", err)
		}
		if next.IsError {
			return nil, fmt.Errorf("job_status: %s", firstText(next))
		}
		res = next
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &st); err != nil {
			return nil, fmt.Errorf("job_status: %w", err)
		}
		if st.Job.State == "running" {
			fmt.Fprintf(stderr, "lakegate fetch: export job %s running: %d rows so far\n", id, st.Job.Rows)
		}
	}
	if st.Job.State != "done" {
		return nil, fmt.Errorf("run_sql: the export job %s", strings.TrimPrefix(firstText(res), "Job "+id+" "))
	}
	return res, nil
}

// firstText is a tool result's first text.
func firstText(res *mcpsdk.CallToolResult) string {
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcpsdk.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// exportAttempts bounds the run_sql calls of one export that are refused
// as rate_limited (a refused call runs nothing and takes no token).
const exportAttempts = 5

// rateLimitedWait reads a failed tool result's text: for a rate_limited
// error, the wait it names (with a little jitter, at most a minute),
// else 0.
func rateLimitedWait(text string) time.Duration {
	var e struct {
		Error struct {
			Kind       string  `json:"kind"`
			RetryAfter float64 `json:"retry_after"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(text), &e) != nil || e.Error.Kind != "rate_limited" ||
		e.Error.RetryAfter <= 0 || e.Error.RetryAfter > 60 {
		return 0
	}
	wait := time.Duration(e.Error.RetryAfter * float64(time.Second))
	return wait + rand.N(wait/10+10*time.Millisecond)
}

// bearerTransport adds a bearer token to every request.
// refused, when set, notes an answer of 401: the token was not taken.
type bearerTransport struct {
	token   string
	base    http.RoundTripper
	refused *atomic.Bool
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && b.refused != nil {
		b.refused.Store(true)
	}
	return resp, err
}

// output opens where the result goes. A file is written under a temporary
// name and renamed by commit only when the fetch succeeded, so a failed
// fetch never leaves a partial file under the asked name.
func output(path string, stdout io.Writer) (io.Writer, func(error) error, error) {
	if path == "-" || path == "" {
		return stdout, func(err error) error { return err }, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return nil, nil, fmt.Errorf("output: %w", err)
	}
	commit := func(err error) error {
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
		return err
	}
	return tmp, commit, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// drawProgress redraws a one-line progress bar.
func drawProgress(w io.Writer, done, total int64, elapsed time.Duration) {
	const width = 30
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	bar := strings.Repeat("=", int(frac*width)) + strings.Repeat(" ", width-int(frac*width))
	rate := float64(done) / max(elapsed.Seconds(), 0.001) / 1e6
	fmt.Fprintf(w, "\r[%s] %3.0f%% %.1f/%.1f MB %.0f MB/s", bar, frac*100, float64(done)/1e6, float64(total)/1e6, rate)
}
