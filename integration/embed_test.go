package integration

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
)

// The plugin is a plugin: examples/embed, a Gin server with its own routes
// and its own API-key auth, mounts lakegate's MCP plugin and engine; the
// TypeScript SDK uses every tool over /mcp/sse and /mcp, and the host's
// own routes are untouched.
func TestEmbeddedPlugin(t *testing.T) {
	env := nodeEnv(t)
	bin := filepath.Join(t.TempDir(), "embed")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "../examples/embed").CombinedOutput(); err != nil {
		t.Fatalf("go build examples/embed: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(binaryEnv(), "EMBED_DATABASE_URL="+appURL, "EMBED_QUERY_ROLE="+pgtest.QueryRole, "EMBED_LISTEN=127.0.0.1:0", "EMBED_API_KEYS=ada=key-ada")
	logs := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	listening := regexp.MustCompile(`embed listening on (http://\S+)`)
	var base string
	testutil.Eventually(t, 30*time.Second, "the embed example's listening line", func() bool {
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			base = m[1]
		}
		return base != ""
	})

	// The host's own routes and auth, untouched.
	if code, body := get(t, base+"/hello", ""); code != 200 || body != "hello from the host\n" {
		t.Errorf("/hello: got %d %q", code, body)
	}
	if code, body := get(t, base+"/whoami", "key-ada"); code != 200 || body != "ada\n" {
		t.Errorf("/whoami: got %d %q, want ada", code, body)
	}
	if code, _ := get(t, base+"/mcp/sse", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("/mcp/sse with a wrong key: got %d, want the host's 401", code)
	}

	args, _ := json.Marshal(toolArgs)
	for _, tc := range []struct{ name, path string }{{"sse", "/mcp/sse"}, {"http", "/mcp"}} {
		out, err := runNode(t, env, 2*time.Minute, "node", "client.mjs", base+tc.path, tc.name, "key-ada", string(args))
		if err != nil {
			t.Fatalf("%s: node client.mjs: %v\n%s", tc.name, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var sum struct {
			Server string                            `json:"server"`
			Tools  map[string]struct{ IsError bool } `json:"tools"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
			t.Fatalf("%s: summary: %v\n%s", tc.name, err, out)
		}
		if sum.Server != "lakegate" || len(sum.Tools) != 11 {
			t.Errorf("%s: got server %q and %d tools, want lakegate and 11", tc.name, sum.Server, len(sum.Tools))
		}
		for name, r := range sum.Tools {
			// Without a block store there are no transfers to read, and
			// exports run as no jobs.
			if r.IsError != (name == "get_result_block" || name == "job_status" || name == "cancel_job") {
				t.Errorf("%s: tool %s: isError %v", tc.name, name, r.IsError)
			}
		}
	}
}
