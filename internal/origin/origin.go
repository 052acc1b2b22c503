// Package origin guards HTTP routes against browsers on other sites: the
// Origin check of the MCP routes, shared by the host's browser-facing
// routes (the console and the APIs it calls).
package origin

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/lakegate/lakegate"
)

// Validate checks an allow-list: each entry is "*" or a bare origin such
// as "https://app.example.com" or "http://localhost:5173".
func Validate(origins []string) error {
	for i, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("allowed origins[%d] %q: want scheme://host[:port], e.g. https://app.example.com", i, o)
		}
	}
	return nil
}

// Policy says which browser origins may call a group of routes.
type Policy struct {
	// Allowed is the allow-list (Validate); "*" allows any origin.
	Allowed []string
	// SameOrigin also allows pages served by this server: an Origin whose
	// host is the request's Host.
	SameOrigin bool
	// Routes names the routes in refusals ("MCP routes").
	Routes string
	// Setting is the setting that extends Allowed, for the refusal's hint.
	Setting string
	// LoopbackHost refuses, on a loopback listener, a Host that is not a
	// loopback name (DNS rebinding), as the MCP specification asks of
	// local MCP servers. Routes that need a bearer token a rebinding page
	// cannot have may leave it off, so that a proxy on the same machine
	// can pass the public Host name on.
	LoopbackHost bool
}

// Check refuses a request whose Origin header the policy does not allow,
// and with LoopbackHost a request that reached a loopback listener under
// a non-loopback Host name (DNS rebinding: a page on evil.example whose
// name now resolves to 127.0.0.1). Requests that send no Origin, as non-browser
// clients do, pass; so do pages from a loopback origin when the listener
// is on loopback (they run on the same machine as the server).
func (p Policy) Check(r *http.Request) *lakegate.Error {
	loopback := false
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
		loopback = IsLoopback(local.String())
		if p.LoopbackHost && loopback && !IsLoopback(r.Host) {
			return &lakegate.Error{Kind: lakegate.KindForbidden,
				Message: fmt.Sprintf("Host %q is not a loopback name on a loopback listener", r.Host),
				Hint:    "connect with http://127.0.0.1:PORT or http://localhost:PORT"}
		}
	}
	o := r.Header.Get("Origin")
	if o == "" || p.allowed(o) || (loopback && loopbackOrigin(o)) || (p.SameOrigin && sameOrigin(r, o)) {
		return nil
	}
	return &lakegate.Error{Kind: lakegate.KindForbidden,
		Message: fmt.Sprintf("Origin %q is not allowed on %s", o, p.Routes),
		Hint:    "an operator can add it to " + p.Setting}
}

func (p Policy) allowed(o string) bool {
	o = strings.TrimSuffix(o, "/")
	return slices.ContainsFunc(p.Allowed, func(a string) bool {
		return a == "*" || strings.EqualFold(strings.TrimSuffix(a, "/"), o)
	})
}

// sameOrigin reports whether origin o is a page of this server: its host
// (and port) is the request's Host. The scheme is not compared: behind a
// proxy that ends TLS the page is https and the request reaches the
// server as plain http.
func sameOrigin(r *http.Request, o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// IsLoopback reports whether a host or host:port names the loopback
// interface: localhost (and its subdomains), 127.0.0.0/8 or ::1.
func IsLoopback(hostport string) bool {
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
func loopbackOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && IsLoopback(u.Host)
}
