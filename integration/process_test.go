package integration

import (
	"errors"
	"net/http"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testutil"
)

// proc is the lakegate binary serving on a loopback port.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string
	stderr *testutil.Buffer
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, set before done closes
}

var listeningLine = regexp.MustCompile(`"msg":"lakegate listening","url":"(http://[^"]+)"`)

// startProc runs `bin serve` on the test database with MCP on, JSON logs
// and the test secret; extra adds environment variables. It returns once
// the server listens. The test's cleanup kills it if it still runs.
func startProc(t *testing.T, bin string, extra ...string) *proc {
	t.Helper()
	return startProcWithin(t, 30*time.Second, bin, extra...)
}

// startProcWithin is startProc waiting up to wait for the server to listen.
func startProcWithin(t *testing.T, wait time.Duration, bin string, extra ...string) *proc {
	t.Helper()
	env := append([]string{
		"LAKEGATE_LISTEN=127.0.0.1:0",
		"LAKEGATE_JWT_SECRET=" + testSecret,
		"LAKEGATE_LOG_FORMAT=json",
		"LAKEGATE_MCP_ENABLED=true",
		"LAKEGATE_DATA_DIR=" + t.TempDir(),
	}, extra...)
	p := &proc{t: t, cmd: exec.Command(bin, "serve"), stderr: &testutil.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = binaryEnv(env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	exited := false
	listening := testutil.Within(wait, func() bool {
		if m := listeningLine.FindStringSubmatch(p.stderr.String()); m != nil {
			p.base = m[1]
			return true
		}
		select {
		case <-p.done:
			exited = true
			return true
		default:
			return false
		}
	})
	switch {
	case p.base != "":
		return p
	case exited:
		t.Fatalf("lakegate exited early (%v): %s", p.err, p.stderr.String())
	case !listening:
		t.Fatalf("lakegate did not listen within %v: %s", wait, p.stderr.String())
	}
	return p
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits up to d for the process to exit and returns its exit code
// (-1 when killed by a signal).
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("lakegate did not exit within %v", d)
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		p.t.Fatalf("wait: %v", p.err)
	}
	return 0
}

// newClient is an HTTP client of its own, so that its connections can be
// closed when the test ends (no goroutine left behind).
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}
