package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

// bare is a plugin with the two required methods and no capability.
type bare struct{}

func (bare) Mount(r gin.IRouter, _ gin.HandlerFunc) {
	r.GET("/bare", func(c *gin.Context) { c.String(http.StatusOK, "bare") })
}

func (bare) Shutdown(context.Context) error { return nil }

// A plugin with only Mount and Shutdown is hosted: its routes answer, the
// views it cannot fill degrade, and what needs a capability it lacks says
// so with not_found.
func TestPluginWithoutCapabilities(t *testing.T) {
	cfg := config.Default()
	cfg.JWTSecret = testSecret
	engine, _ := newEngine(t)
	s, err := New(cfg, engine, bare{}, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	client := &http.Client{Timeout: 30 * time.Second}
	admin := token("ops", lakegate.RoleAdmin)

	for _, tc := range []struct {
		name, method, path, body, want string
	}{
		{"enable", "POST", "/admin/mcp/enable", "", "run-time switch"},
		{"disable", "POST", "/admin/mcp/disable", "", "run-time switch"},
		{"status", "GET", "/admin/mcp/status", "", "status"},
		{"command", "GET", "/", "", "status"},
		{"sessions", "GET", "/console/api/sessions", "", "sessions"},
		{"close session", "DELETE", "/console/api/sessions/x", "", "sessions"},
		{"transfers", "GET", "/console/api/transfers", "", "block transfers"},
		{"delete transfer", "DELETE", "/console/api/transfers/x", "", "block transfers"},
		{"download", "POST", "/console/api/downloads", `{"transfer": "x"}`, "block transfers"},
		{"tools reload", "POST", "/admin/mcp/tools/reload", "", "tools reload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.name == "command" {
				hdr = []string{"command", "get mcp status"}
			}
			r := send(t, client, hs.URL, tc.method, tc.path, admin, tc.body, hdr...)
			e := r.errBody(t)
			if r.code != http.StatusNotFound || e.Error.Kind != lakegate.KindNotFound || !strings.HasSuffix(e.Error.Message, "has no "+tc.want) {
				t.Errorf("got %d %+v, want 404 not_found: ... has no %s", r.code, e.Error, tc.want)
			}
		})
	}

	for _, path := range []string{"/bare", "/console/api/me", "/console/api/overview"} {
		if r := send(t, client, hs.URL, "GET", path, admin, ""); r.code != http.StatusOK {
			t.Errorf("GET %s: got %d %s, want 200", path, r.code, r.body)
		}
	}
	var me struct {
		MCPEnabled bool `json:"mcp_enabled"`
	}
	send(t, client, hs.URL, "GET", "/console/api/me", admin, "").decode(t, &me)
	if !me.MCPEnabled {
		t.Error("a plugin without a switch: got mcp_enabled false, want true (always on)")
	}
}
