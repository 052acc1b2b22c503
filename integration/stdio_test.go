package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
)

// buildBinary builds cmd/lakegate into a temporary directory, with the
// given build tags: none is the production build; "conformance" adds the
// MCP conformance suite's fixtures (serve --conformance).
func buildBinary(t *testing.T, tags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lakegate")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.CommandContext(t.Context(), "go", "build", "-tags", strings.Join(tags, ","), "-o", bin, "../cmd/lakegate")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// binaryEnv is the environment of a lakegate process on the test database.
func binaryEnv(extra ...string) []string {
	env := []string{"LAKEGATE_DATABASES=iot=" + appURL, "LAKEGATE_QUERY_ROLE=" + pgtest.QueryRole, "LAKEGATE_LOG_LEVEL=info", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	return append(env, extra...)
}

func TestStdioGoClient(t *testing.T) {
	bin := buildBinary(t)
	var stderr testutil.Buffer
	cmd := exec.Command(bin, "stdio", "--sub", "desktop")
	cmd.Env = binaryEnv()
	cmd.Stderr = &stderr
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "lakegate-it", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to lakegate stdio: %v\nstderr:\n%s", err, stderr.String())
	}
	ctx := t.Context()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) < 5 {
		t.Errorf("tools: got %d, want at least 5", len(tools.Tools))
	}
	var out result
	callJSON(t, cs, "run_sql", map[string]any{"database": "iot", "sql": "SELECT count(*) AS n FROM devices"}, &out)
	if len(out.Rows) != 1 || out.Rows[0][0].(interface{ String() string }).String() != "50" {
		t.Errorf("devices: got %v, want [[50]]", out.Rows)
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != 3 {
		t.Errorf("prompts: got %v %v, want 3", prompts, err)
	}
	res, err := cs.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: "lakegate://databases"})
	if err != nil || !strings.Contains(res.Contents[0].Text, `"iot"`) {
		t.Errorf("read lakegate://databases: got %v %v", res, err)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	logs := stderr.String()
	for _, want := range []string{"mcp stdio session opened", "subject=desktop", "tool=run_sql"} {
		if !strings.Contains(logs, want) {
			t.Errorf("stderr: want %q in the logs:\n%s", want, logs)
		}
	}
}
