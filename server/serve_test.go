package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/ssetest"
	"github.com/lakegate/lakegate/internal/testutil"
)

// running is a Server answering on a loopback port through Serve.
type running struct {
	base   string
	stop   context.CancelFunc
	done   chan error
	client *http.Client
}

// startServe runs Serve on 127.0.0.1:0 with opts; setup may add routes.
// The test's cleanup stops it if the test did not.
func startServe(t *testing.T, opts *Options, setup func(*Server)) *running {
	t.Helper()
	return startServeWith(t, config.Default(), opts, setup)
}

// startServeWith is startServe with the configuration cfg.
func startServeWith(t *testing.T, cfg config.Config, opts *Options, setup func(*Server)) *running {
	t.Helper()
	cfg.JWTSecret = testSecret
	engine, plugin := newEngine(t)
	s, err := New(cfg, engine, plugin, opts)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &running{base: "http://" + ln.Addr().String(), stop: stop, done: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{}}}
	go func() { r.done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-r.done:
		case <-time.After(15 * time.Second):
			t.Error("Serve did not return")
		}
		r.client.CloseIdleConnections()
		_ = s.Close(context.Background())
	})
	return r
}

// shutdown cancels Serve's ctx and returns its result, failing the test if
// it takes longer than within.
func (r *running) shutdown(t *testing.T, within time.Duration) error {
	t.Helper()
	r.stop()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(within):
		t.Fatalf("Serve did not return within %v", within)
		return nil
	}
}

func (r *running) get(ctx context.Context, path, tok string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", r.base+path, nil)
	if err != nil {
		return nil, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return r.client.Do(req)
}

func TestServeShutdownEndsSSE(t *testing.T) {
	r := startServe(t, nil, nil)
	stream, err := ssetest.Open(t.Context(), r.client, r.base+"/mcp/sse", ssetest.Bearer(token("agent", lakegate.RoleReader)))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	ev, err := stream.Next(5 * time.Second)
	if err != nil || !strings.HasPrefix(ev.Raw, "event: endpoint\ndata: /mcp/messages/?session_id=") {
		t.Fatalf("got %+v, %v, want the endpoint event", ev, err)
	}

	start := time.Now()
	if err := r.shutdown(t, 5*time.Second); err != nil {
		t.Errorf("Serve: got %v, want nil", err)
	}
	for {
		_, err := stream.Next(5 * time.Second)
		if errors.Is(err, ssetest.ErrTimeout) {
			t.Fatal("the SSE stream did not end")
		}
		if err != nil {
			break
		}
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("shutdown took %v, want well under the drain timeout", d)
	}
	if _, err := r.get(t.Context(), "/health", ""); err == nil {
		t.Error("got an answer after shutdown, want a refused connection")
	}
}

func TestServeDrain(t *testing.T) {
	tests := []struct {
		name, path string
		drain      time.Duration
		wantCode   int // 0: the client sees a broken connection
	}{
		{"in-flight request finishes", "/slow", 5 * time.Second, http.StatusOK},
		// A request still running when the drain ends is stopped and
		// answers 503 with retry_after.
		{"stuck request answers 503", "/stuck", 200 * time.Millisecond, http.StatusServiceUnavailable},
		// One that does not stop is cut after the answer grace.
		{"deaf request is cut", "/deaf", 200 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			started := make(chan struct{}, 1)
			cfg := config.Default()
			cfg.DrainTimeout = config.Duration(tt.drain)
			r := startServeWith(t, cfg, nil, func(s *Server) {
				// /slow finishes 300ms after shutdown starts; /stuck when
				// its request is cancelled; /deaf when the test ends.
				s.router.GET("/slow", func(c *gin.Context) {
					started <- struct{}{}
					<-release
					c.String(http.StatusOK, "done")
				})
				s.router.GET("/stuck", func(c *gin.Context) {
					started <- struct{}{}
					<-c.Request.Context().Done()
					fail(c, c.Request.Context().Err())
				})
				s.router.GET("/deaf", func(c *gin.Context) {
					started <- struct{}{}
					<-release
				})
			})
			type result struct {
				code       int
				body       string
				retryAfter string
				err        error
			}
			got := make(chan result, 1)
			go func() {
				resp, err := r.get(t.Context(), tt.path, "")
				if err != nil {
					got <- result{err: err}
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got <- result{code: resp.StatusCode, body: string(b), retryAfter: resp.Header.Get("Retry-After")}
			}()
			<-started
			if tt.path == "/deaf" {
				defer close(release)
			} else {
				time.AfterFunc(300*time.Millisecond, func() { close(release) })
			}
			if err := r.shutdown(t, 10*time.Second); err != nil {
				t.Errorf("Serve: got %v, want nil: a drain that ran out is no failure", err)
			}
			res := <-got
			if res.code != tt.wantCode {
				t.Fatalf("client: got %d %q (%v), want %d", res.code, res.body, res.err, tt.wantCode)
			}
			if res.code == http.StatusServiceUnavailable && (res.retryAfter != "1" ||
				!strings.Contains(res.body, `"kind":"unavailable"`) || !strings.Contains(res.body, "shutting down")) {
				t.Errorf("stopped request: got Retry-After %q, body %s; want 1 and the shutting down error", res.retryAfter, res.body)
			}
		})
	}
}

func TestServeListenerError(t *testing.T) {
	cfg := config.Default()
	cfg.JWTSecret = testSecret
	engine, plugin := newEngine(t)
	s, err := New(cfg, engine, plugin, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	done := make(chan error, 1)
	go func() { done <- s.Serve(t.Context(), ln) }()
	select {
	case err := <-done:
		if err == nil || !strings.HasPrefix(err.Error(), "serve: ") {
			t.Errorf("got %v, want a serve: error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return on a closed listener")
	}
}

// TestServeReadTimeout: requests that never finish sending their headers
// or body lose their connection (the slowloris): half-sent headers within
// the header timeout, an unauthenticated body at once (it is never waited
// for), an authenticated body within the read timeout; while an
// authenticated stream lives on past both.
func TestServeReadTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	cfg := config.Default()
	cfg.HeaderTimeout = config.Duration(timeout)
	cfg.ReadTimeout = config.Duration(20 * time.Second)
	r := startServeWith(t, cfg, nil, nil)
	cfg.ReadTimeout = config.Duration(timeout)
	short := startServeWith(t, cfg, nil, nil)

	tok := token("agent", lakegate.RoleReader)
	body := "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
	for _, tc := range []struct {
		name    string
		r       *running
		req     string
		want    string
		timeout time.Duration
	}{
		{"headers", r, "GET /health HTTP/1.1\r\nHost: x\r\n", "", timeout},
		// Bodies never waited for: closed at once, well before read_timeout.
		{"unauthenticated body", r, "POST /rest/sql HTTP/1.1\r\nHost: x" + body, "401", 0},
		{"unknown route body", r, "POST /nowhere HTTP/1.1\r\nHost: x" + body, "404", 0},
		{"health body", r, "GET /health HTTP/1.1\r\nHost: x" + body, "200", 0},
		{"authenticated body", short, "POST /rest/sql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok + body, "400", timeout},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(tc.r.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, tc.req); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(conn) // the answer if any, then the close
		if err != nil {
			t.Fatalf("%s: got %v (after %q), want the server to close the connection", tc.name, err, got)
		}
		if d := time.Since(start); d > tc.timeout+5*time.Second {
			t.Errorf("%s: the half-sent request held its connection %v, want about %v", tc.name, d, tc.timeout)
		}
		if status, _, _ := strings.Cut(strings.TrimPrefix(string(got), "HTTP/1.1 "), " "); tc.want != "" && status != tc.want {
			t.Errorf("%s: got %q, want %s", tc.name, got, tc.want)
		}
	}

	stream, err := ssetest.Open(t.Context(), r.client, r.base+"/mcp/sse", ssetest.Bearer(token("agent", lakegate.RoleReader)))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for deadline := time.Now().Add(4 * timeout); ; {
		_, err := stream.Next(time.Until(deadline))
		if errors.Is(err, ssetest.ErrTimeout) {
			break
		}
		if err != nil {
			t.Fatalf("the authenticated stream ended within %v: %v", 4*timeout, err)
		}
	}
}

// Close ends what New started (here an authorization server's discovery and
// key refreshes); a second Close, or one at the same time, is harmless.
func TestServerCloseIdempotent(t *testing.T) {
	ti := newTestIssuer(t, "", oauthMeta, "")
	st := oauthStack(t, ti.issuer) // its cleanup closes it once more
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := st.srv.Close(t.Context()); err != nil {
				t.Errorf("Close: got %v, want nil", err)
			}
		})
	}
	wg.Wait()
	if err := st.srv.Close(t.Context()); err != nil {
		t.Errorf("Close after Close: got %v, want nil", err)
	}
}

// With shutdown_delay, /ready answers 503 at once while the other routes
// are still served, and the listener closes only after the delay.
func TestServeShutdownDelay(t *testing.T) {
	const delay = 2 * time.Second
	cfg := config.Default()
	cfg.ShutdownDelay = config.Duration(delay)
	r := startServeWith(t, cfg, nil, nil)
	get := func(path string) int {
		resp, err := r.client.Get(r.base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/ready"); got != http.StatusOK {
		t.Fatalf("/ready before shutdown: %d", got)
	}
	stopped := time.Now()
	r.stop()
	testutil.Eventually(t, 10*time.Second, "/ready to turn 503 at shutdown", func() bool {
		return get("/ready") == http.StatusServiceUnavailable
	})
	// The listener is still open after /ready turned 503.
	if got := get("/health"); got != http.StatusOK {
		t.Errorf("/health during the delay: %d, want 200", got)
	}
	if err := r.shutdown(t, 15*time.Second); err != nil {
		t.Errorf("Serve: %v", err)
	}
	if d := time.Since(stopped); d < delay {
		t.Errorf("Serve returned %v after the shutdown began, want after the delay, %v", d, delay)
	}
}
