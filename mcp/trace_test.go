package mcp

import (
	"log/slog"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
)

func TestTrace(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			logs := &testutil.Buffer{}
			log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			p, _ := newTestPlugin(t, Options{Trace: on, Logger: log})
			cs := connectStdio(t, p, lakegate.Caller{Subject: "s"}, nil)
			_, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_tables",
				Arguments: map[string]any{"database": "shop", "password": "hunter2", "api_key": "k-123"}})
			if err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			traced := strings.Contains(out, `msg="mcp message" direction=in method=tools/call`)
			if traced != on {
				t.Fatalf("trace %v: got traced=%v in logs:\n%s", on, traced, out)
			}
			if strings.Contains(out, "hunter2") || strings.Contains(out, "k-123") {
				t.Errorf("a secret reached the log:\n%s", out)
			}
			if on && !strings.Contains(out, `\"password\":\"xxxxx\"`) {
				t.Errorf("want the masked field in the trace:\n%s", out)
			}
		})
	}
}

func TestTraceJSONCut(t *testing.T) {
	got := traceJSON(map[string]string{"x": strings.Repeat("a", 2*traceLimit)})
	if len(got) != traceLimit+len("...(cut)") || !strings.HasSuffix(got, "...(cut)") {
		t.Errorf("got %d bytes, want the payload cut at %d", len(got), traceLimit)
	}
}
