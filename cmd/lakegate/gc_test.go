package main

import (
	"bytes"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/gctune"
	"github.com/lakegate/lakegate/internal/testutil"
)

// gc_headroom raises GOGC after a collection, and undoing it puts it
// back; with the GOGC variable set it is not applied, and says so.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := config.Default()
	cfg.GCHeadroom = 512 << 20
	undo := tuneGC(cfg, log)
	runtime.GC()
	testutil.Eventually(t, 5*time.Second, "GOGC to rise", func() bool { return gctune.GOGC() > 1000 })
	undo()
	if got := gctune.GOGC(); got != 100 {
		t.Errorf("GOGC %d after undo, want 100", got)
	}

	t.Setenv("GOGC", "200")
	undo = tuneGC(cfg, log)
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	undo()
	if got := gctune.GOGC(); got != 100 || !strings.Contains(logs.String(), "GOGC variable is set") {
		t.Errorf("with GOGC set: GOGC %d, logs %q; want 100 and a line saying why", got, logs.String())
	}
}
