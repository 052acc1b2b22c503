package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/testutil"
)

// groupTools is the built-in tools.json with one group, sensors, of the
// tools named.
func groupTools(t *testing.T, tools ...string) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(lakegate.DefaultTools, &doc); err != nil {
		t.Fatal(err)
	}
	doc["groups"] = []map[string]any{{"name": "sensors", "tools": tools}}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// putTools writes dir/tools.json as an editor does: aside, then renamed in.
func putTools(t *testing.T, dir string, data []byte) {
	t.Helper()
	testutil.ReplaceFile(t, filepath.Join(dir, "tools.json"), data)
}

// TestToolsReloadProcess: the binary serves a tools.json group at
// /mcp/sensors; SIGHUP reloads an edit, and the TypeScript SDK's session
// on the group is told its tools changed and lists the new ones;
// `lakegate admin tools reload` refuses a bad file with its line (the
// group keeps its tools) and reloads a good one, saying what is served.
func TestToolsReloadProcess(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	putTools(t, dir, groupTools(t, "list_tables", "describe_table"))
	p := startProc(t, bin, "LAKEGATE_MCP_CONFIG_DIR="+dir)
	tok := token("reloader", "reader")

	// The TypeScript SDK, when installed, follows the reload.
	var lines *bufio.Scanner
	node := filepath.Join(jsDir, "node_modules", ".bin", "node")
	if _, err := os.Stat(node); err == nil {
		abs, _ := filepath.Abs(node)
		cmd := exec.CommandContext(t.Context(), abs, "reload.mjs", p.base+"/mcp/sensors", tok)
		cmd.Dir, cmd.Env = jsDir, nodeEnv(t)
		var stderr testutil.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("reload.mjs stderr: %s", stderr.String())
			}
		})
		lines = bufio.NewScanner(out)
		var first struct {
			Tools       []string `json:"tools"`
			ListChanged bool     `json:"listChanged"`
		}
		if !lines.Scan() || json.Unmarshal(lines.Bytes(), &first) != nil {
			t.Fatalf("reload.mjs: no tool list (%v): %s", lines.Err(), stderr.String())
		}
		if !slices.Equal(first.Tools, []string{"describe_table", "list_tables"}) || !first.ListChanged {
			t.Errorf("TypeScript SDK on /mcp/sensors: got %+v, want the group's two tools and listChanged", first)
		}
	} else {
		t.Log("Node clients not installed: the TypeScript SDK part is skipped (make test installs them)")
	}

	putTools(t, dir, groupTools(t, "list_tables", "describe_table", "run_sql"))
	p.signal(syscall.SIGHUP)
	testutil.Eventually(t, 10*time.Second, "SIGHUP's reload logged", func() bool {
		return strings.Contains(p.stderr.String(), "SIGHUP: tools reloaded")
	})
	if lines != nil {
		var second struct{ Tools []string }
		if !lines.Scan() || json.Unmarshal(lines.Bytes(), &second) != nil {
			t.Fatalf("reload.mjs: no second tool list after the reload (%v)", lines.Err())
		}
		if !slices.Equal(second.Tools, []string{"describe_table", "list_tables", "run_sql"}) {
			t.Errorf("TypeScript SDK after the reload: got %v", second.Tools)
		}
	}

	admin := func(args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), bin, append([]string{"admin", "tools", "reload", "--server", p.base}, args...)...)
		cmd.Env = []string{"LAKEGATE_TOKEN=" + token("ops", "admin"), "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	putTools(t, dir, []byte("{\n  \"tools\": [],\n  \"groups\": 7\n}\n"))
	if out, err := admin(); err == nil || !strings.Contains(out, "line 3") {
		t.Errorf("admin tools reload of a bad file: got %v %s, want refused at line 3", err, out)
	}
	cs := connectTo(t, p.base+"/mcp/sensors", tok)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(res.Tools) != 3 {
		t.Errorf("after a refused reload: got %v %v, want the group's 3 tools kept", res, err)
	}

	putTools(t, dir, groupTools(t, "list_tables"))
	out, err := admin()
	if err != nil || !strings.Contains(out, "reloaded:") || !regexp.MustCompile(`/mcp/sensors\s+list_tables\n`).MatchString(out) {
		t.Errorf("admin tools reload: got %v\n%s", err, out)
	}
	t.Logf("lakegate admin tools reload:\n%s", out)
}

// connectTo opens a go-sdk Streamable HTTP session on endpoint with tok.
func connectTo(t *testing.T, endpoint, tok string) *mcpsdk.ClientSession {
	t.Helper()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "lakegate-it", Version: "1"}, nil).Connect(t.Context(),
		&mcpsdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: httpClient(tok), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", endpoint, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
