package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lakegate/lakegate/internal/testutil"
)

// The plugin's timers, tested in a synctest bubble: time moves only when
// every goroutine waits, so each timer is seen to fire at its instant.
// Requests go straight to the router, without sockets.

// streamRecorder is an http.ResponseWriter for an event stream the test
// reads while the handler writes it.
type streamRecorder struct {
	header http.Header
	body   testutil.Buffer
}

func (r *streamRecorder) Header() http.Header         { return r.header }
func (r *streamRecorder) Write(p []byte) (int, error) { return r.body.Write(p) }
func (r *streamRecorder) WriteHeader(int)             {}
func (r *streamRecorder) Flush()                      {}

// An SSE stream carries a keepalive comment every Keepalive, and none
// before.
func TestSSEKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = DefaultKeepalive
		p, _ := newTestPlugin(t, Options{Keepalive: every})
		ctx, cancel := context.WithCancel(t.Context())
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/mcp/sse", nil)
		req.Header.Set("X-Sub", "alice")
		w := &streamRecorder{header: http.Header{}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			testRouter(p).ServeHTTP(w, req)
		}()
		synctest.Wait()
		if got := w.body.String(); !strings.HasPrefix(got, "event: endpoint\n") {
			t.Fatalf("stream: got %q, want the endpoint event first", got)
		}
		opened := time.Now()
		for _, step := range []struct {
			at   time.Duration // since the stream opened
			want int           // keepalives by then
		}{
			{every - time.Nanosecond, 0},
			{every, 1},
			{2*every - time.Nanosecond, 1},
			{5 * every, 5},
		} {
			time.Sleep(time.Until(opened.Add(step.at)))
			synctest.Wait()
			if got := strings.Count(w.body.String(), ": keepalive\n\n"); got != step.want {
				t.Fatalf("keepalives %s after the stream opened: got %d, want %d", step.at, got, step.want)
			}
		}
		cancel() // the client leaves
		<-done
	})
}

// A Streamable HTTP session idle for SessionTimeout is closed; a request
// before then keeps it open for another SessionTimeout.
func TestStreamableSessionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 10 * time.Minute
		p, _ := newTestPlugin(t, Options{SessionTimeout: idle})
		router := testRouter(p)
		post := func(session, body string) *httptest.ResponseRecorder {
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mcp", strings.NewReader(body))
			req.Header.Set("X-Sub", "alice")
			req.Header.Set("Authorization", "Bearer test")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if session != "" {
				req.Header.Set("Mcp-Session-Id", session)
				req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			}
			w := httptest.NewRecorder()
			router.ServeHTTP(w, req)
			return w
		}
		init := post("", initBody)
		sid := init.Header().Get("Mcp-Session-Id")
		if init.Code != http.StatusOK || sid == "" {
			t.Fatalf("initialize: got %d %q session %q, want 200 with a session id", init.Code, init.Body, sid)
		}
		if w := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); w.Code != http.StatusAccepted {
			t.Fatalf("initialized: got %d %q, want 202", w.Code, w.Body)
		}
		ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
		time.Sleep(idle - time.Second)
		synctest.Wait()
		if w := post(sid, ping); w.Code != http.StatusOK {
			t.Fatalf("ping after %s idle: got %d %q, want 200", idle-time.Second, w.Code, w.Body)
		}
		time.Sleep(idle - time.Second)
		synctest.Wait()
		if got := p.Status().Sessions["streamable"]; got != 1 {
			t.Fatalf("sessions %s after the last request: got %v, want 1", idle-time.Second, got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := p.Status().Sessions["streamable"]; got != 0 {
			t.Errorf("sessions %s after the last request: got %v, want 0", idle, got)
		}
		if w := post(sid, ping); w.Code != http.StatusNotFound {
			t.Errorf("ping after the timeout: got %d %q, want 404", w.Code, w.Body)
		}
	})
}
