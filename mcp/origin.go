package mcp

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/lakegate/lakegate"
)

// checkOrigins validates the allow-list: each entry is "*" or a bare origin
// such as "https://app.example.com" or "http://localhost:5173".
func checkOrigins(origins []string) error {
	for i, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("mcp allowed origins[%d] %q: want scheme://host[:port], e.g. https://app.example.com", i, o)
		}
	}
	return nil
}

// checkOrigin guards the HTTP MCP routes against browsers: a request whose
// Origin header is not on the allow-list is refused, and a request that
// reached a loopback listener under a non-loopback Host name is refused too
// (DNS rebinding: a page on evil.example whose name now resolves to
// 127.0.0.1). Clients that send no Origin, as non-browser clients do, pass;
// so do pages from a loopback origin when the listener is on loopback
// (they run on the same machine as the server).
func (p *Plugin) checkOrigin(c *gin.Context) {
	r := c.Request
	loopback := false
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
		loopback = isLoopback(local.String())
		if loopback && !isLoopback(r.Host) {
			fail(c, &lakegate.Error{Kind: lakegate.KindForbidden,
				Message: fmt.Sprintf("Host %q is not a loopback name on a loopback listener", r.Host),
				Hint:    "connect with http://127.0.0.1:PORT or http://localhost:PORT"})
			return
		}
	}
	origin := r.Header.Get("Origin")
	if origin == "" || p.originAllowed(origin) || (loopback && loopbackOrigin(origin)) {
		return
	}
	fail(c, &lakegate.Error{Kind: lakegate.KindForbidden,
		Message: fmt.Sprintf("Origin %q is not allowed on MCP routes", origin),
		Hint:    "an operator can add it to mcp_allowed_origins"})
}

func (p *Plugin) originAllowed(origin string) bool {
	origin = strings.TrimSuffix(origin, "/")
	return slices.ContainsFunc(p.opts.AllowedOrigins, func(o string) bool {
		return o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin)
	})
}

// isLoopback reports whether a host or host:port names the loopback
// interface: localhost (and its subdomains), 127.0.0.0/8 or ::1.
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackOrigin reports whether an Origin header names a loopback host.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && isLoopback(u.Host)
}
