package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCallInstructions counts the server's CPU instructions per tool call
// with callgrind, which is steady whatever the machine's load: the real
// binary runs under valgrind (GOMAXPROCS=1, async preemption off), a go-sdk
// client calls run_sql over the legacy SSE transport, and the counts of a
// batch of calls (after a warm-up) are divided by the calls. A benchmark,
// run by make bench:
//
//	LAKEGATE_BENCH_CPU=1 LAKEGATE_BENCH_DATABASE_URL=... go test -run '^TestCallInstructions$' -count=1 -v ./integration/
//
// LAKEGATE_BENCH_CPU_OUT=DIR keeps the dumps in DIR for callgrind_annotate;
// LAKEGATE_BENCH_BIN=PATH measures that binary instead of this tree's.
func TestCallInstructions(t *testing.T) {
	benchURL := benchDatabase(t, "LAKEGATE_BENCH_CPU")
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("valgrind is not installed (apt-get install valgrind)")
	}
	bin := os.Getenv("LAKEGATE_BENCH_BIN") // another build to compare, e.g. an older commit
	if bin == "" {
		bin = buildBinary(t)
	}
	dir := t.TempDir()
	if keep := os.Getenv("LAKEGATE_BENCH_CPU_OUT"); keep != "" {
		dir = keep // the dumps stay there, for callgrind_annotate
	}
	out := filepath.Join(dir, "callgrind.out")
	wrapper := filepath.Join(dir, "lakegate-under-callgrind")
	script := fmt.Sprintf("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s %s \"$@\"\n", out, bin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p := startProcWithin(t, 5*time.Minute, wrapper, benchEnv(benchURL, "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1", "LAKEGATE_MCP_KEEPALIVE=1h")...)
	cs := benchSession(t, p)
	pid := strconv.Itoa(p.cmd.Process.Pid)
	control := func(args ...string) {
		t.Helper()
		cmd := exec.Command("callgrind_control", append(args, pid)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control %v: %v: %s", args, err, b)
		}
	}
	const calls = 50
	measure := func(name string, args map[string]any) float64 {
		for range 3 { // warm up: catalog, plan cache, connections
			callTool(t, cs, args)
		}
		control("--zero")
		for range calls {
			callTool(t, cs, args)
		}
		before := time.Now()
		control("--dump=" + name)
		ir := dumpedInstructions(t, out, before)
		t.Logf("%s: %.2f M instructions per call (callgrind, %d calls)", name, ir/calls/1e6, calls)
		return ir / calls
	}
	rows := measure("run_sql_1000_rows", map[string]any{"database": "bench",
		"sql": "SELECT * FROM readings ORDER BY id LIMIT 1000", "max_rows": 1000})
	point := measure("run_sql_point", map[string]any{"database": "bench",
		"sql": "SELECT * FROM readings WHERE id = $1", "params": []any{4242}})
	t.Logf("per row of a 1000-row call, over a point call: %.0f instructions", (rows-point)/1000)
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
