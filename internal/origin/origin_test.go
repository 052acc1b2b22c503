package origin

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"*", true},
		{"https://app.example.com", true},
		{"http://localhost:5173", true},
		{"app.example.com", false},
		{"https://app.example.com/path", false},
		{"ftp://x", false},
		{"https://user@x", false},
	} {
		t.Run(tc.origin, func(t *testing.T) {
			if got := Validate([]string{tc.origin}) == nil; got != tc.ok {
				t.Errorf("got ok=%v, want %v", got, tc.ok)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"127.0.0.1:80", true}, {"[::1]:8080", true}, {"localhost", true}, {"LOCALHOST:1", true},
		{"a.localhost:1", true}, {"127.9.9.9", true}, {"evil.example", false}, {"10.0.0.1:80", false}, {"", false},
	} {
		if got := IsLoopback(tc.host); got != tc.want {
			t.Errorf("IsLoopback(%q): got %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	public := &net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 8080}
	loop := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}
	same := Policy{Allowed: []string{"https://app.example.com"}, SameOrigin: true, Routes: "console routes", Setting: "x"}
	mcpOnly := Policy{Allowed: []string{"https://app.example.com"}, Routes: "MCP routes", Setting: "x", LoopbackHost: true}
	for _, tc := range []struct {
		name         string
		p            Policy
		local        net.Addr
		tls          bool
		host, origin string
		ok           bool
	}{
		{"no origin", mcpOnly, public, false, "lake.example:8080", "", true},
		{"allow-listed", mcpOnly, public, false, "lake.example:8080", "https://app.example.com", true},
		{"other site", same, public, false, "lake.example:8080", "https://evil.example", false},
		{"same origin allowed", same, public, false, "lake.example:8080", "http://lake.example:8080", true},
		{"same origin, case", same, public, false, "Lake.Example:8080", "http://lake.example:8080", true},
		{"same origin not asked for", mcpOnly, public, false, "lake.example:8080", "http://lake.example:8080", false},
		{"same host, other scheme: a proxy that ends TLS", same, public, false, "lake.example", "https://lake.example", true},
		{"same origin over TLS", same, public, true, "lake.example:8080", "https://lake.example:8080", true},
		{"same host, other port", same, public, false, "lake.example:8080", "http://lake.example:9090", false},
		{"rebinding: same origin is no excuse", mcpOnly, loop, false, "evil.example:8080", "http://evil.example:8080", false},
		{"rebinding host, no origin", mcpOnly, loop, false, "evil.example:8080", "", false},
		{"a local proxy's public Host without LoopbackHost", same, loop, false, "lake.example", "", true},
		{"without LoopbackHost a rebinding page is same-origin (it has no token)", same, loop, false, "evil.example:8080", "http://evil.example:8080", true},
		{"loopback page on loopback", mcpOnly, loop, false, "127.0.0.1:8080", "http://localhost:3000", true},
		{"loopback page on a public listener", mcpOnly, public, false, "lake.example:8080", "http://localhost:3000", false},
		{"null origin", same, public, false, "lake.example:8080", "null", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/x", nil)
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
			r.Host = tc.host
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			err := tc.p.Check(r)
			if (err == nil) != tc.ok {
				t.Fatalf("got %v, want ok=%v", err, tc.ok)
			}
			if err != nil && err.Kind != "forbidden" {
				t.Errorf("kind %q, want forbidden", err.Kind)
			}
		})
	}
}
