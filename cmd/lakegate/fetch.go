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
			"their CRC-32C; a file given with -o appears only when all of it checks out (standard\n" +
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
	start := time.Now()
	var firstBytes time.Duration // when the first block was written out
	c.Progress = func(done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if firstBytes == 0 {
			firstBytes = time.Since(start)
		}
		if bar {
			drawProgress(stderr, done, total, time.Since(start))
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
	finish := func(err error) error { return err }
	if f.sql != "" {
		if id, finish, err = startExport(ctx, f, hc, stderr); err != nil {
			return commit(err)
		}
	}
	m, err := c.Fetch(ctx, id, w)
	if err = commit(finish(err)); err != nil {
		return err
	}
	if bar {
		fmt.Fprintln(stderr)
	}
	fmt.Fprintf(stderr, "lakegate fetch: transfer %s: %d rows, %d blocks, %d bytes, every block checked; first bytes out after %.3fs, all after %.3fs\n",
		m.ID, m.Rows, len(m.Blocks), m.Bytes, firstBytes.Seconds(), time.Since(start).Seconds())
	return nil
}

// startExport runs f.sql through run_sql with export: true over /mcp and
// returns the transfer id as soon as the export's job names it: the
// blocks are fetched as they are written. The caller passes the fetch's
// error to finish, which ends the session: interrupted, it cancels the job
// (the command owned it); failed, it answers the job's own error when the
// job failed (its transfer goes with it).
func startExport(ctx context.Context, f fetchFlags, hc *http.Client, stderr io.Writer) (id string, finish func(error) error, err error) {
	if f.database == "" {
		return "", nil, errors.New("--sql needs --database")
	}
	// The token is added by the transport: never follow a redirect with it.
	var refused atomic.Bool
	authed := &http.Client{Transport: bearerTransport{token: f.token, base: hc.Transport, refused: &refused},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "lakegate-fetch", Version: version}, nil)
	base := strings.TrimSuffix(f.server, "/")
	cs, err := client.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: authed}, nil)
	if err != nil && refused.Load() {
		return "", nil, fmt.Errorf("connect to %s/mcp: %w; %s", base, err, tokenHint(base))
	}
	if err != nil {
		return "", nil, fmt.Errorf("connect to %s/mcp: %w", base, err)
	}
	start := time.Now()
	var res *mcpsdk.CallToolResult
	for attempt := 1; ; attempt++ {
		// No profile of the rows: nobody here reads it, and it would
		// cost the server its CPU.
		res, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "run_sql", Meta: mcpsdk.Meta{mcp.ProfileMetaKey: false}, Arguments: map[string]any{
			"database": f.database, "sql": f.sql, "export": true, "max_rows": 0, "format": f.format}})
		if err != nil {
			cs.Close()
			return "", nil, fmt.Errorf("run_sql: %w", err)
		}
		if !res.IsError {
			break
		}
		wait := rateLimitedWait(firstText(res))
		if wait <= 0 || attempt >= exportAttempts {
			cs.Close()
			return "", nil, fmt.Errorf("run_sql: %s", firstText(res))
		}
		fmt.Fprintf(stderr, "lakegate fetch: run_sql: rate limited; retrying in %.1fs\n", wait.Seconds())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			cs.Close()
			return "", nil, ctx.Err()
		case <-t.C:
		}
	}
	j := &exportJob{cs: cs, stderr: stderr}
	id, err = j.transfer(ctx, res)
	if err != nil {
		return "", nil, j.finish(ctx, err)
	}
	if j.id != "" && j.running {
		fmt.Fprintf(stderr, "lakegate fetch: export job %s writes transfer %s, fetched as it is written; named in %.3fs\n", j.id, id, time.Since(start).Seconds())
	} else {
		fmt.Fprintf(stderr, "lakegate fetch: exported %d rows as transfer %s in %.3fs\n", j.rows, id, time.Since(start).Seconds())
	}
	return id, func(err error) error { return j.finish(ctx, err) }, nil
}

// exportJob follows the job an export answered with, on the session that
// started it.
type exportJob struct {
	cs      *mcpsdk.ClientSession
	stderr  io.Writer
	id      string // the job's; "" when the export answered without one
	running bool   // when its transfer was named
	rows    int64  // done: the rows exported
}

// jobState is what an export's answer says of the job it runs as, and
// once done of its transfer.
type jobState struct {
	Mode string `json:"mode"`
	Job  struct {
		ID       string `json:"job_id"`
		State    string `json:"state"`
		Rows     int64  `json:"rows"`
		Transfer string `json:"transfer_id"`
	} `json:"job"`
	RowCount  int64 `json:"row_count"`
	Truncated bool  `json:"truncated"`
	Transfer  struct {
		ID string `json:"transfer_id"`
	} `json:"transfer"`
}

// transfer is the transfer of the export that answered res: as soon as
// its running job names it (asking job_status with short waits), or that
// of the done job.
func (j *exportJob) transfer(ctx context.Context, res *mcpsdk.CallToolResult) (string, error) {
	var st jobState
	for {
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &st); err != nil {
			return "", fmt.Errorf("run_sql: %w", err)
		}
		if st.Mode != "job" {
			break // an answer with its transfer
		}
		j.id = st.Job.ID
		if st.Job.State == "running" && st.Job.Transfer != "" {
			j.running = true
			return st.Job.Transfer, nil
		}
		if st.Job.State != "running" {
			break
		}
		next, err := j.cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "job_status", Arguments: map[string]any{"job_id": j.id, "wait_s": 1}})
		if err != nil {
			return "", fmt.Errorf("job_status: %w", err)
		}
		if next.IsError {
			return "", fmt.Errorf("job_status: %s", firstText(next))
		}
		res = next
	}
	if st.Mode == "job" && st.Job.State != "done" {
		return "", fmt.Errorf("run_sql: the export job %s", strings.TrimPrefix(firstText(res), "Job "+j.id+" "))
	}
	if st.Transfer.ID == "" {
		return "", errors.New("run_sql: the answer has no transfer")
	}
	j.rows = st.RowCount
	if st.Truncated {
		j.warnCut(st.RowCount)
	}
	return st.Transfer.ID, nil
}

// warnCut says that the export stopped at the server's row cap.
func (j *exportJob) warnCut(rows int64) {
	fmt.Fprintf(j.stderr, "lakegate fetch: the export stopped at the server's row cap (%d rows, max_row_limit): the result is cut\n", rows)
}

// finish ends the session once the fetch has ended with err: interrupted
// (ctx), the job is cancelled; a fetch that failed while the job ran
// answers the job's error if the job failed.
func (j *exportJob) finish(ctx context.Context, err error) error {
	defer j.cs.Close()
	if j.id == "" {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if ctx.Err() != nil {
		_, _ = j.cs.CallTool(cctx, &mcpsdk.CallToolParams{Name: "cancel_job", Arguments: map[string]any{"job_id": j.id}})
		return err
	}
	if !j.running {
		return err
	}
	// The job's end: why the transfer went, or whether the rows were cut
	// at the server's row cap.
	res, cerr := j.cs.CallTool(cctx, &mcpsdk.CallToolParams{Name: "job_status", Arguments: map[string]any{"job_id": j.id, "wait_s": 2}})
	if cerr != nil || res.IsError {
		return err
	}
	var st jobState
	raw, _ := json.Marshal(res.StructuredContent)
	if json.Unmarshal(raw, &st) != nil {
		return err
	}
	switch {
	case err != nil && (st.Job.State == "failed" || st.Job.State == "cancelled"):
		return fmt.Errorf("run_sql: the export job %s", strings.TrimPrefix(firstText(res), "Job "+j.id+" "))
	case err == nil && st.Truncated:
		j.warnCut(st.RowCount)
	}
	return err
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
