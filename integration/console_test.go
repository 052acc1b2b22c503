package integration

// TestConsole drives the operator console in a real headless Chromium
// against a real server on PostgreSQL with a block store. Its steps share
// the server and the browser, in order: a reader signs in (a wrong token is
// refused) and sees the overview; browses the data, meets the did-you-mean
// hint and pages through a result, each cell equal to what pgx reads;
// downloads it as CSV. An admin closes the SSE session a TypeScript SDK
// client holds (the client sees it end), turns MCP off and on (/mcp/sse
// answers 503, then not), downloads a block transfer (the manifest's
// SHA-256) and deletes it (404). All along, the page must throw no exception
// and log no error (CSP violations are errors), but the failed requests the
// steps make on purpose. Screenshots of each page, at 1280×800 and some at
// a phone's 390×844, go to $LAKEGATE_ARTIFACTS/console, else to
// artifacts/console at the repository root.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/jobs"
)

// consoleWait bounds each wait for the page. Generous: the test runs under
// the race detector on loaded machines, and nothing in it is timed.
const consoleWait = 20 * time.Second

// consoleExpectedFailures are the failed requests the steps cause on
// purpose, which Chromium logs as errors ("Failed to load resource: the
// server responded with a status of 401").
var consoleExpectedFailures = map[string]int{
	"/console/api/me":               http.StatusUnauthorized,       // the wrong token
	"/rest/sql":                     http.StatusBadRequest,         // the misspelt table
	"/console/api/overview?replica": http.StatusServiceUnavailable, // the replica shown stopped (TestConsoleCluster)
}

func TestConsole(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("Chromium is not installed (Debian: apt-get install chromium); this test drives it")
	}
	node := nodeEnv(t)
	e := start(t, envOptions{blocks: &blocktransport.Options{},
		config: func(c *config.Config) { c.MCPSessionIdleAfter = config.Duration(time.Second) }})
	b := openBrowser(t, chromium) // after start, so that it is gone before start's leak check
	reader, admin := token("alice", "reader"), token("root", "admin")
	const devices = "SELECT id, name FROM devices ORDER BY id"

	t.Run("reader signs in", func(t *testing.T) {
		b.do(t, "open /console", chromedp.Navigate(e.base+"/console"))
		b.signIn(t, "not-a-token")
		b.visible(t, "#signin-error")
		b.signIn(t, reader)
		b.waitText(t, "#whoami", "alice · reader")
		b.waitText(t, "#mcp-state", "on")
		for _, chart := range []string{"#chart-calls", "#chart-latency", "#chart-errors"} {
			b.waitJS(t, chart+" is an SVG chart", fmt.Sprintf(`(el => el && (el instanceof SVGElement || el.querySelector("svg") !== null))(document.querySelector(%s))`, jsString(chart)))
		}
		b.visible(t, "#sessions-by-subject")
		b.waitJS(t, "#databases lists iot", `document.querySelector("#databases")?.textContent.includes("iot")`)
		if evalJS[bool](t, b, `document.querySelector("#nav-sessions")?.checkVisibility() ?? false`) {
			t.Error("a reader sees #nav-sessions")
		}
		b.shot(t, "overview-reader")
		b.phoneShot(t, "overview-phone")
	})

	t.Run("reader queries data", func(t *testing.T) {
		b.click(t, "#nav-data")
		b.visible(t, "#db-select")
		b.waitJS(t, "#db-select offers iot", `document.querySelector("#db-select option[value=iot]") !== null`)
		b.fill(t, "#db-select", "iot")
		b.waitJS(t, "#tables-list shows devices and readings", `(t => t.includes("devices") && t.includes("readings"))(document.querySelector("#tables-list")?.textContent ?? "")`)
		b.click(t, `#tables-list [data-table="readings"]`)
		b.waitJS(t, "#table-detail shows the columns of readings", `document.querySelector("#table-detail")?.textContent.includes("temperature")`)

		b.fill(t, "#sql", "SELECT * FROM readngs")
		b.click(t, "#run-sql")
		b.visible(t, "#sql-error .error-hint")
		if hint := evalJS[string](t, b, `document.querySelector("#sql-error .error-hint").textContent`); !strings.Contains(hint, "readings") {
			t.Errorf("#sql-error .error-hint: got %q, want the did-you-mean naming readings", hint)
		}
		b.shot(t, "data-error")

		b.fill(t, "#sql", devices)
		b.fill(t, "#max-rows", "2")
		b.click(t, "#run-sql")
		b.waitResult(t, pgTable(t, e, devices+" LIMIT 2"))
		b.do(t, "wait for #next-page enabled", chromedp.WaitVisible(chromedp.ID("next-page")), chromedp.WaitEnabled(chromedp.ID("next-page")))
		b.shot(t, "data-result")
		b.phoneShot(t, "data-phone")
		b.click(t, "#next-page")
		b.waitResult(t, pgTable(t, e, devices+" OFFSET 2 LIMIT 2"))

		// A page of very wide rows is refused past the page's byte bound,
		// not held.
		b.fill(t, "#sql", "SELECT repeat('x', 1000000) AS wide FROM generate_series(1, 20)")
		b.fill(t, "#max-rows", "100")
		b.click(t, "#run-sql")
		b.visible(t, "#sql-error .error-message")
		if msg := evalJS[string](t, b, `document.querySelector("#sql-error .error-message").textContent`); !strings.Contains(msg, "larger than 16 MiB") {
			t.Errorf("a 20 MB page: got %q, want it refused past 16 MiB", msg)
		}
	})

	t.Run("reader follows new rows", func(t *testing.T) { consoleFollow(t, b, e) })

	t.Run("reader downloads CSV", func(t *testing.T) {
		b.fill(t, "#sql", devices)
		recs, err := csv.NewReader(bytes.NewReader(b.download(t, "#download-csv"))).ReadAll()
		if err != nil {
			t.Fatalf("the downloaded CSV: %v", err)
		}
		if want := pgTable(t, e, devices); !slices.EqualFunc(recs, want, slices.Equal) {
			t.Errorf("downloaded CSV:\ngot  %v\nwant %v", recs, want)
		}
	})

	t.Run("admin closes a session", func(t *testing.T) {
		b.click(t, "#signout")
		b.visible(t, "#token")
		b.signIn(t, admin)
		b.waitText(t, "#whoami", "root · admin")

		lines, wait := holdSession(t, node, e.base+"/mcp/sse", token("holder", "reader"))
		nextLine(t, lines, "ready")
		open := e.plugin.Sessions()
		i := slices.IndexFunc(open, func(s host.SessionInfo) bool { return s.Subject == "holder" })
		if i < 0 {
			t.Fatalf("no session of holder among %+v", open)
		}
		id := open[i].ID
		row := fmt.Sprintf(`#sessions-table tr[data-session-id=%s]`, jsString(id))
		b.click(t, "#nav-sessions")
		b.visible(t, row)
		if text := evalJS[string](t, b, fmt.Sprintf(`document.querySelector(%s).textContent`, jsString(row))); !strings.Contains(text, "holder") {
			t.Errorf("the session's row: got %q, want its subject holder", text)
		}
		// Its id, shortened, whole on hover and copied whole.
		idCell := fmt.Sprintf(`document.querySelector(%s)`, jsString(row+" code.session-id"))
		if got, want := evalJS[string](t, b, idCell+`.textContent`), id[:8]+"…"+id[len(id)-4:]; got != want {
			t.Errorf("the session's id: got %q, want %q", got, want)
		}
		if got := evalJS[string](t, b, idCell+`.title`); got != id {
			t.Errorf("the session's id on hover: got %q, want %q", got, id)
		}
		b.click(t, row+" button.copy-id")
		b.waitText(t, row+" button.copy-id", "copied")
		ctx, cancel := context.WithTimeout(b.ctx, consoleWait)
		copied, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
		cancel()
		if err != nil || copied != id {
			t.Errorf("the copied id: got %q (%v), want %q", copied, err, id)
		}
		// The holder calls nothing: idle after mcp_session_idle_after
		// (1 s), on the next refresh.
		b.waitText(t, row+" .state", "idle")
		b.fill(t, "#sessions-filter", "active")
		b.do(t, "wait for the idle row to be filtered out", chromedp.WaitNotPresent(chromedp.CSS(row)))
		b.fill(t, "#sessions-filter", "idle")
		b.visible(t, row)
		b.shot(t, "sessions")
		b.click(t, "#nav-overview")
		b.waitText(t, "#sessions-idle", "1")
		b.waitText(t, "#sessions-active", "0")
		b.click(t, "#nav-sessions")
		b.visible(t, row)
		b.confirm(t, row+" button.close-session")
		b.do(t, "wait for the row to go", chromedp.WaitNotPresent(chromedp.CSS(row)))
		nextLine(t, lines, "closed")
		if err := wait(); err != nil {
			t.Errorf("node hold.mjs: %v", err)
		}
	})

	t.Run("admin turns MCP off and on", func(t *testing.T) {
		b.click(t, "#nav-overview")
		b.waitText(t, "#mcp-state", "on")
		b.confirm(t, "#mcp-toggle")
		b.waitText(t, "#mcp-state", "off")
		if got := streamStatus(t, e.base+"/mcp/sse", reader); got != http.StatusServiceUnavailable {
			t.Errorf("GET /mcp/sse with MCP off: got %d, want 503", got)
		}
		b.confirm(t, "#mcp-toggle")
		b.waitText(t, "#mcp-state", "on")
		if got := streamStatus(t, e.base+"/mcp/sse", reader); got == http.StatusServiceUnavailable {
			t.Errorf("GET /mcp/sse with MCP on again: got %d", got)
		}
		b.shot(t, "overview-admin")
	})

	t.Run("admin downloads and deletes a transfer", func(t *testing.T) {
		br, _ := export(t, e.connect(t, admin), devices, map[string]any{"export": true})
		id := br.Transfer.ID
		row := fmt.Sprintf(`#transfers-table tr[data-transfer-id=%s]`, jsString(id))
		b.click(t, "#nav-transfers")
		b.visible(t, row)
		b.shot(t, "transfers")

		// The download reads the whole: the manifest has its SHA-256 then.
		sum := sha256.Sum256(b.download(t, row+" button.download-transfer"))
		var m blocktransport.Manifest
		if status, body := get(t, e.base+"/mcp/blocks/"+id, admin); status != http.StatusOK || json.Unmarshal([]byte(body), &m) != nil {
			t.Fatalf("GET /mcp/blocks/%s: %d %s", id, status, body)
		}
		if got := hex.EncodeToString(sum[:]); got != m.SHA256 {
			t.Errorf("downloaded transfer: sha256 %s, want the manifest's %s", got, m.SHA256)
		}

		b.confirm(t, row+" button.delete-transfer")
		b.do(t, "wait for the row to go", chromedp.WaitNotPresent(chromedp.CSS(row)))
		if status, body := get(t, e.base+"/mcp/blocks/"+id, admin); status != http.StatusNotFound {
			t.Errorf("GET /mcp/blocks/%s after delete: %d %s, want 404", id, status, body)
		}
	})

	t.Run("admin cancels a running job", func(t *testing.T) {
		// Rows without end, until cancelled: a sum over 20,000 numbers
		// each, far below the 10M-row cap in the test's time.
		slow := "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) " +
			"SELECT x, (SELECT sum(y) FROM generate_series(1, 20000 + x % 2) y) FROM c"
		cs := e.connect(t, admin)
		res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql",
			Arguments: map[string]any{"database": "iot", "sql": slow, "export": true}})
		job, ok := jobOf(t, res)
		if err != nil || !ok || job.State != jobs.Running {
			t.Fatalf("the export: got %v %v, want a running job", res, err)
		}
		row := fmt.Sprintf(`#jobs-table tr[data-job-id=%s]`, jsString(job.ID))
		b.click(t, "#nav-transfers")
		b.visible(t, row)
		b.waitText(t, row+" td:nth-child(4)", "running")
		b.shot(t, "jobs")
		b.confirm(t, row+" button.cancel-job")
		b.waitText(t, row+" td:nth-child(4)", "cancelled")
	})

	t.Run("no errors in the page", func(t *testing.T) {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, msg := range b.errs {
			t.Error(msg)
		}
	})
}

// browserPage is one tab of a headless Chromium that the test owns.
type browserPage struct {
	ctx       context.Context
	downloads string // where Chromium saves downloads, by their GUID
	shots     string

	mu   sync.Mutex
	errs []string // the page's exceptions and logged errors
}

// openBrowser starts Chromium for the test, stopped by its cleanup.
func openBrowser(t *testing.T, path string) *browserPage {
	t.Helper()
	b := &browserPage{downloads: t.TempDir(), shots: shotsDir(t)}
	run, stopRun := context.WithTimeout(context.Background(), 5*time.Minute)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless)
	alloc, stopAlloc := chromedp.NewExecAllocator(run, opts...)
	ctx, stopTab := chromedp.NewContext(alloc)
	b.ctx = ctx
	t.Cleanup(func() {
		var proc *os.Process
		if c := chromedp.FromContext(ctx); c != nil && c.Browser != nil {
			proc = c.Browser.Process()
		}
		stopTab()
		stopAlloc() // waits for the browser to exit
		stopRun()
		if proc != nil && proc.Signal(syscall.Signal(0)) == nil {
			t.Errorf("chromium (pid %d) still runs after the test", proc.Pid)
		}
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			if msg = fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, d.Text); d.Exception != nil {
				msg += " " + d.Exception.Description
			}
		case *cdplog.EventEntryAdded:
			if en := ev.Entry; en.Level == cdplog.EntryLevelError && !expectedFailure(en) {
				msg = fmt.Sprintf("%s error logged (%s): %s", en.Source, en.URL, en.Text)
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.errs = append(b.errs, msg)
			b.mu.Unlock()
		}
	})
	if err == nil {
		_, err = chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: b.downloads, EventsEnabled: new(true)})
	}
	// The console copies ids; the test reads them back.
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if err == nil {
			_, err = chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
				Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	b.do(t, "set the viewport to 1280×800", chromedp.EmulateViewport(1280, 800))
	return b
}

func expectedFailure(en *cdplog.Entry) bool {
	for path, status := range consoleExpectedFailures {
		if en.Source == cdplog.EntrySourceNetwork && strings.Contains(en.URL, path) && strings.Contains(en.Text, fmt.Sprintf("status of %d ", status)) {
			return true
		}
	}
	return false
}

// shotsDir is where the screenshots go, made if needed.
func shotsDir(t *testing.T) string {
	dir := os.Getenv("LAKEGATE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "artifacts")
	}
	dir, err := filepath.Abs(filepath.Join(dir, "console"))
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("console screenshots: %s", dir)
	return dir
}

// do runs actions, bounded by consoleWait.
func (b *browserPage) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, consoleWait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s (page %s): %v", what, evalJS[string](t, b, "location.hash"), err)
	}
}

func (b *browserPage) click(t *testing.T, sel string) {
	t.Helper()
	b.do(t, "click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

func (b *browserPage) visible(t *testing.T, sel string) {
	t.Helper()
	b.do(t, "wait for "+sel+" to show", chromedp.WaitVisible(chromedp.CSS(sel)))
}

// evalJS evaluates a JavaScript expression in the page.
func evalJS[T any](t *testing.T, b *browserPage, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, consoleWait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// poll waits until the JavaScript expression expr is true.
func (b *browserPage) poll(expr string) error {
	_, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(consoleWait)))
	return err
}

func (b *browserPage) waitJS(t *testing.T, what, expr string) {
	t.Helper()
	if err := b.poll(expr); err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}

// waitText waits until the text of sel is want.
func (b *browserPage) waitText(t *testing.T, sel, want string) {
	t.Helper()
	text := fmt.Sprintf(`document.querySelector(%s)?.textContent.trim() ?? "(no element)"`, jsString(sel))
	if err := b.poll("(" + text + ") === " + jsString(want)); err != nil {
		t.Fatalf("%s: got %q, want %q (%v)", sel, evalJS[string](t, b, text), want, err)
	}
}

// fill sets an input's value as typing does, with its input and change events.
func (b *browserPage) fill(t *testing.T, sel, value string) {
	t.Helper()
	b.visible(t, sel)
	evalJS[chromedp.Void](t, b, fmt.Sprintf(`(el => { el.focus(); el.value = %s;
		el.dispatchEvent(new Event("input", {bubbles: true})); el.dispatchEvent(new Event("change", {bubbles: true})) })(document.querySelector(%s))`,
		jsString(value), jsString(sel)))
}

func (b *browserPage) signIn(t *testing.T, tok string) {
	t.Helper()
	b.fill(t, "#token", tok)
	b.click(t, "#signin")
}

// confirm clicks sel twice: the first click asks to confirm, the second acts.
func (b *browserPage) confirm(t *testing.T, sel string) {
	t.Helper()
	b.click(t, sel)
	if err := b.poll(fmt.Sprintf(`document.querySelector(%s)?.textContent.includes("Confirm")`, jsString(sel))); err != nil {
		t.Fatalf("%s did not ask to confirm (%v): %s", sel, err, evalJS[string](t, b, fmt.Sprintf(`document.querySelector(%s)?.outerHTML ?? "gone"`, jsString(sel))))
	}
	b.click(t, sel)
}

// pgTable runs sql on the database directly and returns its column names
// and rows as text.
func pgTable(t *testing.T, e *env, sql string) [][]string {
	t.Helper()
	rows, err := e.pool.Query(t.Context(), sql)
	if err != nil {
		t.Fatal(err)
	}
	var head []string
	for _, f := range rows.FieldDescriptions() {
		head = append(head, f.Name)
	}
	body, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]string, error) {
		vals, err := r.Values()
		cells := make([]string, len(vals))
		for i, v := range vals {
			cells[i] = fmt.Sprint(v)
		}
		return cells, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return append([][]string{head}, body...)
}

// resultJS reads #result-table as text: the column names, then the rows.
const resultJS = `(t => t && [[...t.querySelectorAll("thead th")].map(c => c.textContent.trim()),
	...[...t.querySelectorAll("tbody tr")].map(r => [...r.cells].map(c => c.textContent.trim()))])(document.querySelector("#result-table"))`

// waitResult waits until #result-table shows want, every cell.
func (b *browserPage) waitResult(t *testing.T, want [][]string) {
	t.Helper()
	js, _ := json.Marshal(want)
	if err := b.poll(fmt.Sprintf(`JSON.stringify(%s) === %s`, resultJS, jsString(string(js)))); err != nil {
		got := evalJS[json.RawMessage](t, b, resultJS)
		t.Fatalf("#result-table: got %s, want %s (%v); #result-status %q", got, js, err,
			evalJS[string](t, b, `document.querySelector("#result-status")?.textContent ?? ""`))
	}
}

// download clicks sel and returns the file the browser saved.
func (b *browserPage) download(t *testing.T, sel string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, consoleWait)
	defer cancel()
	progress := chromedp.BrowserEvents(ctx, browser.DownloadProgress)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("download from %s: %v", sel, err)
		}
		switch ev.State {
		case browser.DownloadProgressStateCompleted:
			data, err := os.ReadFile(filepath.Join(b.downloads, ev.GUID))
			if err != nil {
				t.Fatal(err)
			}
			return data
		case browser.DownloadProgressStateCanceled:
			t.Fatalf("download from %s: canceled", sel)
		}
	}
	t.Fatalf("download from %s: no end", sel)
	return nil
}

// shot saves a full-page screenshot as name.png.
func (b *browserPage) shot(t *testing.T, name string) {
	t.Helper()
	// Two animation frames: what the page drew last is on screen.
	evalJS[chromedp.Void](t, b, `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))`)
	ctx, cancel := context.WithTimeout(b.ctx, consoleWait)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644)
	}
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
}

// phoneShot saves a screenshot at a phone's width, 390×844.
func (b *browserPage) phoneShot(t *testing.T, name string) {
	t.Helper()
	b.do(t, "set the viewport to 390×844", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.shot(t, name)
	b.do(t, "set the viewport to 1280×800", chromedp.EmulateViewport(1280, 800))
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// holdSession runs js/hold.mjs, which holds an SSE session at url until
// the server ends it. It returns the script's output, line by line, and a
// wait for its end; the test's end kills it.
func holdSession(t *testing.T, env []string, url, tok string) (*bufio.Scanner, func() error) {
	t.Helper()
	node, _ := filepath.Abs(filepath.Join(jsDir, "node_modules", ".bin", "node"))
	cmd := exec.CommandContext(t.Context(), node, "hold.mjs", url, tok)
	cmd.Dir, cmd.Env = jsDir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	wait := sync.OnceValue(func() error {
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("%w; stderr: %s", err, stderr.Bytes())
		}
		return nil
	})
	t.Cleanup(func() { _ = wait() })
	return bufio.NewScanner(out), wait
}

// nextLine reads the script's next line (it exits within a minute) and
// checks it is want.
func nextLine(t *testing.T, lines *bufio.Scanner, want string) {
	t.Helper()
	if !lines.Scan() || lines.Text() != want {
		t.Fatalf("node hold.mjs: got line %q (%v), want %q", lines.Text(), lines.Err(), want)
	}
}

// streamStatus opens GET url with tok and returns its status, closing the
// answer unread: with MCP on it is an event stream.
func streamStatus(t *testing.T, url, tok string) int {
	t.Helper()
	resp, err := httpClient(tok).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
