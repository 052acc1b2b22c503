package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

var hexID = regexp.MustCompile(`^[0-9a-f]{16}$`)

func TestRequestID(t *testing.T) {
	st := newStack(t, nil, func(s *Server) {
		s.router.GET("/echo-id", func(c *gin.Context) { c.String(http.StatusOK, RequestID(c.Request.Context())) })
	})
	tests := []struct {
		name, in string
		echoed   bool
	}{
		{"sane", "abc-123_x.Y", true},
		{"64 chars", strings.Repeat("a", 64), true},
		{"absent", "", false},
		{"too long", strings.Repeat("a", 65), false},
		{"space", "a b", false},
		{"newline", "a\nb", false},
		{"slash", "a/b", false},
		{"unicode", "idé", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A recorder, so that headers a real client refuses to send can be tried.
			req := httptest.NewRequestWithContext(t.Context(), "GET", "/echo-id", nil)
			if tt.in != "" {
				req.Header["X-Request-Id"] = []string{tt.in}
			}
			rec := httptest.NewRecorder()
			st.srv.Handler().ServeHTTP(rec, req)
			got := rec.Header().Get("X-Request-ID")
			if tt.echoed && got != tt.in {
				t.Errorf("got %q, want %q", got, tt.in)
			}
			if !tt.echoed && !hexID.MatchString(got) {
				t.Errorf("got %q, want a fresh 16-hex-digit id", got)
			}
			if body := rec.Body.String(); body != got {
				t.Errorf("RequestID(ctx): got %q, want %q", body, got)
			}
		})
	}
	t.Run("on errors too", func(t *testing.T) {
		r := st.do(t, "GET", "/rest/databases", "", "", "X-Request-ID", "req-401")
		if got := r.header.Get("X-Request-ID"); r.code != http.StatusUnauthorized || got != "req-401" {
			t.Errorf("got %d with id %q, want 401 with id req-401", r.code, got)
		}
		if logs := st.logs.String(); !strings.Contains(logs, `"request_id":"req-401"`) {
			t.Errorf("got logs %s, want a line with request_id req-401", logs)
		}
	})
}

func TestUnknownRouteAndMethod(t *testing.T) {
	st := newStack(t, nil)
	tok := token("a", lakegate.RoleAdmin)
	tests := []struct {
		name, method, path string
		want               int
		kind               lakegate.Kind
		allow              string
	}{
		{"unknown route", "GET", "/nope", http.StatusNotFound, lakegate.KindNotFound, ""},
		{"unknown rest route", "GET", "/rest/nope", http.StatusNotFound, lakegate.KindNotFound, ""},
		{"wrong method on health", "POST", "/health", http.StatusMethodNotAllowed, lakegate.KindValidation, "GET"},
		{"wrong method on sql", "GET", "/rest/sql", http.StatusMethodNotAllowed, lakegate.KindValidation, "POST"},
		{"wrong method on admin", "DELETE", "/admin/mcp/status", http.StatusMethodNotAllowed, lakegate.KindValidation, "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := st.do(t, tt.method, tt.path, tok, "")
			if r.code != tt.want {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tt.want)
			}
			e := r.errBody(t)
			if e.Error.Kind != tt.kind || !strings.Contains(e.Error.Message, tt.path) {
				t.Errorf("got %+v, want kind %v naming %s", e.Error, tt.kind, tt.path)
			}
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow: got %q, want %q", got, tt.allow)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	st := newStack(t, func(c *config.Config) { c.MaxBodyBytes = 1024 })
	reader, writer := token("r", lakegate.RoleReader), token("w", lakegate.RoleWriter)
	big := strings.Repeat("x", 2000)
	row := `{"id": 9001, "name": "` + big + `", "site": "s", "kind": "k", "installed": "2024-01-01", "active": true}`
	tests := []struct {
		name, path, tok, body string
		want                  int
	}{
		{"sql small", "/rest/sql", reader, sqlJSON(t, "demo", "SELECT 1 AS one", 0), http.StatusOK},
		{"sql too large", "/rest/sql", reader, sqlJSON(t, "demo", "SELECT '"+big+"' AS x", 0), http.StatusRequestEntityTooLarge},
		{"ingest array too large", "/data/demo/devices", writer, "[" + row + "]", http.StatusRequestEntityTooLarge},
		{"ingest ndjson too large", "/data/demo/devices", writer, row + "\n", http.StatusRequestEntityTooLarge},
		{"ingest leading space too large", "/data/demo/devices", writer, strings.Repeat(" ", 1100) + "[]", http.StatusRequestEntityTooLarge},
	}
	before := st.count(t, "devices")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := st.do(t, "POST", tt.path, tt.tok, tt.body)
			if r.code != tt.want {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tt.want)
			}
			if tt.want == http.StatusRequestEntityTooLarge {
				e := r.errBody(t)
				if e.Error.Kind != lakegate.KindValidation || !strings.Contains(e.Error.Message, "1024") {
					t.Errorf("got %+v, want a validation error naming 1024", e.Error)
				}
			}
		})
	}
	if got := st.count(t, "devices"); got != before {
		t.Errorf("devices: got %d rows, want %d", got, before)
	}
}

func TestErrorRendering(t *testing.T) {
	st := newStack(t, nil, func(s *Server) {
		s.router.GET("/panic", func(*gin.Context) { panic("boom") })
		s.router.GET("/abort", func(*gin.Context) { panic(http.ErrAbortHandler) })
		s.router.GET("/plain", func(c *gin.Context) { fail(c, errors.New("secret detail")) })
		s.router.GET("/deadline", func(c *gin.Context) { fail(c, context.DeadlineExceeded) })
		s.router.GET("/limited", func(c *gin.Context) {
			fail(c, &lakegate.Error{Kind: lakegate.KindRateLimited, Message: "slow down", RetryAfter: 1500 * time.Millisecond})
		})
	})
	tests := []struct {
		path       string
		want       int
		kind       lakegate.Kind
		retryAfter string
	}{
		{"/panic", http.StatusInternalServerError, lakegate.KindInternal, ""},
		{"/plain", http.StatusInternalServerError, lakegate.KindInternal, ""},
		{"/deadline", http.StatusGatewayTimeout, lakegate.KindTimeout, ""},
		{"/limited", http.StatusTooManyRequests, lakegate.KindRateLimited, "2"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := st.do(t, "GET", tt.path, "", "", "X-Request-ID", "id"+tt.path[1:])
			if r.code != tt.want {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tt.want)
			}
			if e := r.errBody(t); e.Error.Kind != tt.kind || strings.Contains(e.Error.Message, "secret") {
				t.Errorf("got %+v, want kind %v and no internal detail", e.Error, tt.kind)
			}
			if got := r.header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After: got %q, want %q", got, tt.retryAfter)
			}
		})
	}
	t.Run("panic is logged with the request id", func(t *testing.T) {
		logs := st.logs.String()
		if !strings.Contains(logs, `"msg":"handler panic","request_id":"idpanic"`) {
			t.Errorf("got logs %s, want a handler panic line with request_id idpanic", logs)
		}
	})
	t.Run("abort handler drops the connection", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", st.http.URL+"/abort", nil)
		resp, err := st.client.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("got %d, want a broken connection", resp.StatusCode)
		}
	})
	t.Run("server keeps answering", func(t *testing.T) {
		for range 3 {
			if r := st.do(t, "GET", "/panic", "", ""); r.code != http.StatusInternalServerError {
				t.Fatalf("got %d, want 500", r.code)
			}
		}
		if r := st.do(t, "GET", "/health", "", ""); r.code != http.StatusOK || !strings.Contains(string(r.body), `"version":"test"`) {
			t.Errorf("got %d %s, want 200 with version test", r.code, r.body)
		}
	})
}

func TestNew(t *testing.T) {
	engine, plugin := newEngine(t)
	good := config.Default()
	good.JWTSecret = testSecret
	short := good
	short.JWTSecret = testSecret[:31]
	tests := []struct {
		name string
		cfg  config.Config
		nilE bool
		nilP bool
	}{
		{name: "short secret", cfg: short},
		{name: "no engine", cfg: good, nilE: true},
		{name: "no plugin", cfg: good, nilP: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Plugin = plugin // a nil Plugin, not a nil *mcp.Plugin in one
			e := engine
			if tt.nilE {
				e = nil
			}
			if tt.nilP {
				p = nil
			}
			if s, err := New(tt.cfg, e, p, nil); err == nil || s != nil {
				t.Errorf("got %v, %v, want nil and an error", s, err)
			}
		})
	}
	t.Run("defaults", func(t *testing.T) {
		s, err := New(good, engine, plugin, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.log == nil {
			t.Error("got no logger, want a discard logger")
		}
	})
}
