package integration

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// underCallgrind is the GODEBUG of a process run under callgrind: no async
// preemption (its signals would be counted), and no RDTSCP in the
// runtime's clock (valgrind 3.19 cannot run it: the process dies of
// SIGILL at its first lock).
const underCallgrind = "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off"

// TestCallInstructions counts the server's CPU instructions per tool call
// with callgrind, which is steady whatever the machine's load: the real
// binary runs under valgrind (GOMAXPROCS=1), a go-sdk client calls run_sql
// over each transport (legacy SSE, Streamable HTTP stateless and in a
// 2025-11-25 session: benchTransports), and a point call, calls of 100
// and 400 rows (answered inline) and of 1000 rows (past the answer
// budget: its rows go on to blocks) are counted over 200 calls each (50
// of 1000 rows), with the bytes the server allocated per call (what the collector's work follows; its own
// share cannot be read from callgrind, whose call graph the runtime's
// stack switches confuse). Beside each count is the floor: a bare go-sdk
// server (testdata/sdkfloor) that runs the same statement through pgx and
// answers the text lakegate answered, under callgrind in the same run.
// lakegate runs with its defaults, then again with gc_headroom 0 (GOGC as
// the runtime sets it; LAKEGATE_BENCH_HEADROOM names another headroom).
// LAKEGATE_BENCH_BIN measures another build (make bench passes an
// earlier one) beside the same floor.
func TestCallInstructions(t *testing.T) {
	benchURL := benchDatabase(t, "LAKEGATE_BENCH_CPU")
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("valgrind is not installed (apt-get install valgrind)")
	}
	bin := os.Getenv("LAKEGATE_BENCH_BIN") // another build to compare, e.g. an older commit
	if bin == "" {
		bin = buildBinary(t)
	}
	calls := []benchCall{
		{"run_sql_1000_rows", map[string]any{"database": "bench", "sql": "SELECT * FROM readings ORDER BY id LIMIT 1000", "max_rows": 1000}, 50},
		{"run_sql_point", map[string]any{"database": "bench", "sql": "SELECT * FROM readings WHERE id = $1", "params": []any{4242}}, 0},
		// Answered inline: 100 rows (the default max_rows) and 400.
		{"run_sql_100_rows", map[string]any{"database": "bench", "sql": "SELECT * FROM readings ORDER BY id LIMIT 100"}, 0},
		{"run_sql_400_rows", map[string]any{"database": "bench", "sql": "SELECT * FROM readings ORDER BY id LIMIT 400", "max_rows": 400}, 0},
	}
	lg := startCallgrind(t, bin, benchEnv(benchURL, "LAKEGATE_MCP_KEEPALIVE=1h")...)
	lgAllocs := func() float64 { return metricValue(t, scrapeMetricsAt(t, lg.base), "go_memstats_alloc_bytes_total") }
	answers := map[string]string{}
	got := map[string]callCost{}
	for _, tr := range benchTransports {
		cs := benchSessionOver(t, lg.base, tr, token("bench", "reader"))
		for _, c := range calls {
			text := callText(t, cs, c.args)
			answers[c.args["sql"].(string)] = text
			if tr == benchTransports[0] {
				t.Logf("%s answers %d bytes of text", c.name, len(text))
			}
			got[tr+"/"+c.name] = lg.measure(t, cs, c, tr, lgAllocs)
		}
		cs.Close()
	}

	answersFile := filepath.Join(t.TempDir(), "answers.json")
	b, _ := json.Marshal(answers)
	if err := os.WriteFile(answersFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	floorBin := filepath.Join(t.TempDir(), "sdkfloor")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", floorBin, "./testdata/sdkfloor").CombinedOutput(); err != nil {
		t.Fatalf("go build sdkfloor: %v\n%s", err, out)
	}
	fl := startCallgrind(t, floorBin, "FLOOR_DATABASE_URL="+appURLOf(benchURL), "FLOOR_ANSWERS="+answersFile)
	flAllocs := func() float64 {
		_, body := get(t, fl.base+"/allocs", "")
		v, err := strconv.ParseFloat(body, 64)
		if err != nil {
			t.Fatalf("/allocs: %q", body)
		}
		return v
	}
	floors := map[string]callCost{}
	for _, tr := range benchTransports {
		cs := benchSessionOver(t, fl.base, tr, "")
		for _, c := range calls {
			floor := fl.measure(t, cs, c, tr, flAllocs)
			floors[tr+"/"+c.name] = floor
			l := got[tr+"/"+c.name]
			t.Logf("%s over %s: %.2f M instructions per call, %.1f KB allocated; go-sdk floor %.2f M, %.1f KB: %.2fx the floor",
				c.name, tr, l.ir/1e6, l.alloc/1e3, floor.ir/1e6, floor.alloc/1e3, l.ir/floor.ir)
		}
		// The floor answering every one of the 1000 rows as CSV (its
		// answer for a statement lakegate did not answer): what a server
		// without an answer budget pays to hand them all to the model.
		every := maps.Clone(calls[0].args)
		every["sql"] = every["sql"].(string) + " -- every row"
		all := fl.measure(t, cs, benchCall{calls[0].name + "_every_row", every, calls[0].calls}, tr, flAllocs)
		l := got[tr+"/"+calls[0].name]
		t.Logf("%s over %s: the floor answering all 1000 rows as CSV %.2f M, %.1f KB: lakegate is %.2fx that floor",
			calls[0].name, tr, all.ir/1e6, all.alloc/1e3, l.ir/all.ir)
		cs.Close()
	}
	// The same calls with gc_headroom 0 (GOGC as the runtime sets it):
	// what the default headroom buys. (Not for another build, which may
	// not have the setting.)
	if os.Getenv("LAKEGATE_BENCH_BIN") != "" {
		return
	}
	headroom := 0
	if v, err := strconv.Atoi(os.Getenv("LAKEGATE_BENCH_HEADROOM")); err == nil {
		headroom = v
	}
	gc := startCallgrind(t, bin, benchEnv(benchURL, "LAKEGATE_MCP_KEEPALIVE=1h", "LAKEGATE_GC_HEADROOM="+strconv.Itoa(headroom))...)
	gcAllocs := func() float64 { return metricValue(t, scrapeMetricsAt(t, gc.base), "go_memstats_alloc_bytes_total") }
	for _, tr := range benchTransports {
		cs := benchSessionOver(t, gc.base, tr, token("bench", "reader"))
		for _, c := range calls {
			l, floor := gc.measure(t, cs, c, tr, gcAllocs), floors[tr+"/"+c.name]
			t.Logf("%s over %s with gc_headroom %d MiB: %.2f M instructions per call: %.2fx the floor, %.2fx the default's",
				c.name, tr, headroom>>20, l.ir/1e6, l.ir/floor.ir, l.ir/got[tr+"/"+c.name].ir)
		}
		cs.Close()
	}
	for _, tr := range benchTransports {
		t.Logf("per row of a 1000-row call over %s, over a point call: %.0f instructions", tr,
			(got[tr+"/run_sql_1000_rows"].ir-got[tr+"/run_sql_point"].ir)/1000)
	}
}

// benchCall is one tool call a benchmark repeats.
type benchCall struct {
	name string
	args map[string]any
	// calls counted; 0: 200. A small call allocates about 100 KB, so the
	// collector runs every 20 to 30 calls: over 50 calls, whether two or
	// three collections fell in the window moved a point call's count by
	// a quarter from run to run; over 200, by a few hundredths.
	calls int
}

// callCost is what one call costs a server under callgrind: instructions
// and bytes allocated.
type callCost struct{ ir, alloc float64 }

// callgrindProc is a server running under callgrind.
type callgrindProc struct {
	*proc
	out string // the dumps' path prefix
}

// startCallgrind runs bin serve under callgrind with env.
func startCallgrind(t *testing.T, bin string, env ...string) *callgrindProc {
	t.Helper()
	dir := t.TempDir()
	if keep := os.Getenv("LAKEGATE_BENCH_CPU_OUT"); keep != "" {
		dir = keep // the dumps stay there, for callgrind_annotate
	}
	out := filepath.Join(dir, filepath.Base(bin)+".callgrind.out")
	wrapper := filepath.Join(t.TempDir(), filepath.Base(bin)+"-under-callgrind")
	script := fmt.Sprintf("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s %s \"$@\"\n", out, bin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &callgrindProc{proc: startProcWithin(t, 5*time.Minute, wrapper, append([]string{"GOMAXPROCS=1", underCallgrind}, env...)...), out: out}
}

func (p *callgrindProc) control(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("callgrind_control", append(args, strconv.Itoa(p.cmd.Process.Pid))...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("callgrind_control %v: %v: %s", args, err, b)
	}
}

// measure counts what c costs the server over c.calls calls on cs, after
// three to warm up (catalog, plans, connections); allocs reads the bytes
// the server has allocated, whose own cost (two reads with no call
// between) is taken out.
func (p *callgrindProc) measure(t *testing.T, cs *mcpsdk.ClientSession, c benchCall, tr string, allocs func() float64) callCost {
	t.Helper()
	calls := cmp.Or(c.calls, 200)
	for range 3 {
		callTool(t, cs, c.args)
	}
	a0 := allocs()
	a1 := allocs()
	p.control(t, "--zero")
	for range calls {
		callTool(t, cs, c.args)
	}
	before := time.Now()
	name := c.name + "_" + tr
	p.control(t, "--dump="+name)
	a2 := allocs()
	ir := dumpedInstructions(t, p.out, before)
	return callCost{ir: ir / float64(calls), alloc: (a2 - a1 - (a1 - a0)) / float64(calls)}
}

// benchTransports are the ways benchSessionOver connects: legacy SSE,
// Streamable HTTP as go-sdk's client speaks it (the stateless 2026-07-28
// revision where the server has it), and Streamable HTTP in a 2025-11-25
// session, as clients of the TypeScript SDK 1.x (Claude Code) speak it.
var benchTransports = []string{"sse", "http", "http-2025"}

// benchSessionOver is a go-sdk client session to base over transport (one
// of benchTransports) with token tok ("" for none); closed when the test
// ends.
func benchSessionOver(t *testing.T, base, transport, tok string) *mcpsdk.ClientSession {
	t.Helper()
	hc := http.DefaultClient
	if tok != "" {
		hc = httpClient(tok)
	}
	var tr mcpsdk.Transport = &mcpsdk.SSEClientTransport{Endpoint: base + "/mcp/sse", HTTPClient: hc}
	var opts *mcpsdk.ClientSessionOptions
	switch transport {
	case "http":
		tr = &mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, MaxRetries: -1}
	case "http-2025":
		tr = &mcpsdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, MaxRetries: -1}
		opts = &mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(t.Context(), tr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callText is the text a call answers.
func callText(t *testing.T, cs *mcpsdk.ClientSession, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("run_sql: %v %v", err, res)
	}
	return res.Content[0].(*mcpsdk.TextContent).Text
}

func callTool(t *testing.T, cs *mcpsdk.ClientSession, args map[string]any) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("run_sql: %v", res.Content[0].(*mcpsdk.TextContent).Text)
	}
}

var totalsLine = regexp.MustCompile(`(?m)^(?:totals|summary): (\d+)`)

// dumpedInstructions reads the instruction count of the newest callgrind
// dump written since not before since.
func dumpedInstructions(t *testing.T, out string, since time.Time) float64 {
	t.Helper()
	files, _ := filepath.Glob(out + "*")
	var newest string
	var at time.Time
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.ModTime().After(at) {
			newest, at = f, st.ModTime()
		}
	}
	if newest == "" || at.Before(since.Add(-time.Second)) {
		t.Fatalf("no callgrind dump in %v", files)
	}
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	m := totalsLine.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no totals in %s: %s", newest, b[:min(len(b), 400)])
	}
	ir, _ := strconv.ParseFloat(string(bytes.TrimSpace(m[1])), 64)
	return ir
}
