package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestTraceInstructions measures what tracing costs a tool call, in CPU
// instructions under callgrind (steady whatever the machine's load): the
// real binary serves run_sql point queries over legacy SSE three times,
// with OpenTelemetry unset (no tracer provider: the hot path's case),
// with an OTLP endpoint and OTEL_TRACES_SAMPLER=always_off (the pipeline
// built, every span dropped), and with always_on (every span exported to
// a receiver on loopback, a batch every 100 ms), and the ratios to the
// unset run are printed. LAKEGATE_BENCH_BIN=PATH adds a first run of that
// build (e.g. one from before tracing existed), unset too, and the ratio
// of this build's unset run to it. A benchmark, run by make bench (about
// 20 s; 6 s more with LAKEGATE_BENCH_BIN):
//
//	LAKEGATE_BENCH_TRACE=1 LAKEGATE_BENCH_DATABASE_URL=... go test -run '^TestTraceInstructions$' -count=1 -v ./integration/
func TestTraceInstructions(t *testing.T) {
	benchURL := benchDatabase(t, "LAKEGATE_BENCH_TRACE")
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("valgrind is not installed (apt-get install valgrind)")
	}
	bin := buildBinary(t)
	rec := startReceiver(t, nil)
	const calls = 200
	args := map[string]any{"database": "bench", "sql": "SELECT * FROM readings WHERE id = $1", "params": []any{4242}}
	runs := []struct {
		name string
		env  []string
	}{
		{"other", nil}, // LAKEGATE_BENCH_BIN's build, when set
		{"unset", nil},
		{"always_off", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rec.srv.URL, "OTEL_TRACES_SAMPLER=always_off"}},
		{"always_on", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rec.srv.URL, "OTEL_TRACES_SAMPLER=always_on", "OTEL_BSP_SCHEDULE_DELAY=100"}},
	}
	per := map[string]float64{}
	other := os.Getenv("LAKEGATE_BENCH_BIN")
	for _, r := range runs {
		b := bin
		if r.name == "other" {
			if other == "" {
				continue
			}
			b = other
		}
		dir := t.TempDir()
		out := filepath.Join(dir, "callgrind.out")
		wrapper := filepath.Join(dir, "lakegate-under-callgrind")
		script := fmt.Sprintf("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s %s \"$@\"\n", out, b)
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		env := append([]string{"GOMAXPROCS=1", underCallgrind, "LAKEGATE_MCP_KEEPALIVE=1h"}, r.env...)
		p := startProcWithin(t, 5*time.Minute, wrapper, benchEnv(benchURL, env...)...)
		cs := benchSession(t, p)
		pid := strconv.Itoa(p.cmd.Process.Pid)
		control := func(args ...string) {
			t.Helper()
			if b, err := exec.Command("callgrind_control", append(args, pid)...).CombinedOutput(); err != nil {
				t.Fatalf("callgrind_control %v: %v: %s", args, err, b)
			}
		}
		for range 3 { // warm up: catalog, plan cache, connections, exporter
			callTool(t, cs, args)
		}
		control("--zero")
		for range calls {
			callTool(t, cs, args)
		}
		before := time.Now()
		control("--dump=" + r.name)
		per[r.name] = dumpedInstructions(t, out, before) / calls
		cs.Close()
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Logf("tracing %-10s %.3f M instructions per run_sql point call (callgrind, %d calls)", r.name, per[r.name]/1e6, calls)
	}
	if rec.requests.Load() == 0 {
		t.Error("always_on exported nothing: the receiver got no request")
	}
	t.Logf("tracing ratios to unset: always_off %.3f, always_on %.3f",
		per["always_off"]/per["unset"], per["always_on"]/per["unset"])
	if other != "" {
		t.Logf("tracing unset, this build / %s: %.3f", other, per["unset"]/per["other"])
	}
}
