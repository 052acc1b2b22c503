package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadOAuth(t *testing.T) {
	t.Run("env", func(t *testing.T) {
		env := map[string]string{
			"LAKEGATE_AUTHORIZATION_SERVERS": "https://auth.example.com, https://login.example.org/tenant1/",
			"LAKEGATE_PUBLIC_URL":            "https://lakegate.example.com",
		}
		got, err := Load("", func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"https://auth.example.com", "https://login.example.org/tenant1/"}
		if !reflect.DeepEqual(got.AuthorizationServers, want) || got.PublicURL != "https://lakegate.example.com" {
			t.Errorf("got %q, %q; want %q, https://lakegate.example.com", got.AuthorizationServers, got.PublicURL, want)
		}
		if !got.HasJWTKeys() {
			t.Error("got HasJWTKeys false, want true: the authorization servers' keys verify tokens")
		}
	})
	t.Run("file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "lakegate.yaml")
		data := "authorization_servers: [\"http://127.0.0.1:9000\"]\npublic_url: http://localhost:32049\n"
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := Load(path, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		if len(got.AuthorizationServers) != 1 || got.AuthorizationServers[0] != "http://127.0.0.1:9000" || got.PublicURL != "http://localhost:32049" {
			t.Errorf("got %q, %q; want the file's settings", got.AuthorizationServers, got.PublicURL)
		}
	})
	t.Run("unset", func(t *testing.T) {
		c := Default()
		if c.HasJWTKeys() || len(c.AuthorizationServers) != 0 || c.PublicURL != "" {
			t.Errorf("got %+v, want no authorization servers and no public_url by default", c)
		}
	})
}

func TestValidateOAuth(t *testing.T) {
	const as = "https://auth.example.com"
	tests := []struct {
		name    string
		servers []string
		public  string
		want    []string // nil: valid
	}{
		{name: "https", servers: []string{as}, public: "https://lakegate.example.com"},
		{name: "issuer with a path", servers: []string{"https://login.example.org/tenant1/"}, public: "https://lakegate.example.com:8443/"},
		{name: "loopback over http", servers: []string{"http://127.0.0.1:9000", "http://[::1]:9000", "http://localhost"}, public: "http://127.0.0.1:32049"},
		{name: "public_url alone", public: "https://lakegate.example.com"},
		{name: "no public_url", servers: []string{as}, want: []string{"authorization_servers needs public_url"}},
		{name: "issuer over http", servers: []string{"http://auth.example.com"}, public: "https://l.example.com",
			want: []string{"authorization_servers[0]", "https://", "loopback"}},
		{name: "issuer with a query", servers: []string{as + "?tenant=1"}, public: "https://l.example.com",
			want: []string{"authorization_servers[0]", "no query"}},
		{name: "issuer with a fragment", servers: []string{as, as + "#x"}, public: "https://l.example.com",
			want: []string{"authorization_servers[1]", "fragment"}},
		{name: "issuer with user info", servers: []string{"https://u:p@auth.example.com"}, public: "https://l.example.com",
			want: []string{"authorization_servers[0]", "user info"}},
		{name: "issuer not a URL", servers: []string{"auth.example.com"}, public: "https://l.example.com",
			want: []string{"authorization_servers[0]", "issuer URL"}},
		{name: "issuer ftp", servers: []string{"ftp://auth.example.com"}, public: "https://l.example.com",
			want: []string{"authorization_servers[0]", "https://"}},
		{name: "public_url over http", servers: []string{as}, public: "http://lakegate.example.com",
			want: []string{"public_url", "loopback"}},
		{name: "public_url with a path", servers: []string{as}, public: "https://example.com/lakegate",
			want: []string{"public_url", "no path"}},
		{name: "public_url with a query", servers: []string{as}, public: "https://example.com?a=1", want: []string{"public_url", "no path, query"}},
		{name: "public_url without a host", servers: []string{as}, public: "lakegate.example.com", want: []string{"public_url", "scheme://host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.AuthorizationServers, c.PublicURL = tt.servers, tt.public
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Errorf("got %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got nil, want an error mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want it to contain %q", err, w)
				}
			}
		})
	}
}
