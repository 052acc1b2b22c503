package integration

import (
	"crypto/rsa"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lakegate/lakegate/config"
)

// issuer is a small OAuth authorization server on loopback: RFC 8414
// metadata, a JWK Set with one RS256 key, and a token endpoint for the
// client_credentials grant (client_secret_basic) that puts the requested
// RFC 8707 resource in aud, as an authorization server serving MCP
// clients does.
type issuer struct {
	url          string
	key          *rsa.PrivateKey
	clientID     string
	clientSecret string
	// resourcePrefix is what a requested resource must start with.
	resourcePrefix string

	mu        sync.Mutex
	resources []string // the resource of each token issued
}

func newIssuer(t *testing.T, resourcePrefix string) *issuer {
	t.Helper()
	is := &issuer{key: rsaKey(t), clientID: "agent-1", clientSecret: "s3cret-for-the-test", resourcePrefix: resourcePrefix}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.url = srv.URL
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                is.url,
			"authorization_endpoint":                is.url + "/authorize",
			"token_endpoint":                        is.url + "/token",
			"jwks_uri":                              is.url + "/jwks",
			"response_types_supported":              []string{"code"},
			"grant_types_supported":                 []string{"client_credentials"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
			"code_challenge_methods_supported":      []string{"S256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]string{rsaJWK("is-1", &is.key.PublicKey)}})
	})
	mux.HandleFunc("POST /token", is.token)
	return is
}

// token answers a client_credentials request with a token for the
// requested resource.
func (is *issuer) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok || id != is.clientID || secret != is.clientSecret {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	resource := r.PostForm.Get("resource")
	if !strings.HasPrefix(resource, is.resourcePrefix) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_target", "error_description": "unknown resource " + resource})
		return
	}
	is.mu.Lock()
	is.resources = append(is.resources, resource)
	is.mu.Unlock()
	tok, err := is.sign(jwt.MapClaims{"iss": is.url, "sub": id, "aud": resource, "roles": []string{"reader"},
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
}

func (is *issuer) sign(claims jwt.MapClaims) (string, error) {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "is-1"
	return tok.SignedString(is.key)
}

func (is *issuer) issued() []string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return append([]string(nil), is.resources...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// startOAuth runs the server with the issuer as its authorization server.
// public_url must be known before the server listens, so the test picks a
// free loopback port first.
func startOAuth(t *testing.T) (*env, *issuer, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	public := "http://127.0.0.1:" + port
	is := newIssuer(t, public)
	e := start(t, envOptions{config: func(c *config.Config) {
		c.Listen = "127.0.0.1:" + port
		c.AuthorizationServers = []string{is.url}
		c.PublicURL = public
	}})
	return e, is, public
}

// TestOAuthDiscoveryTypeScriptSDK: the TypeScript SDK starts from the 401
// of a real request to /mcp and /mcp/sse, finds the issuer through the
// server's RFC 9728 metadata and the issuer's RFC 8414 metadata, gets a
// token for the resource the metadata names (client_credentials), and
// calls a tool with it on both transports.
func TestOAuthDiscoveryTypeScriptSDK(t *testing.T) {
	nenv := nodeEnv(t)
	e, is, public := startOAuth(t)
	out, err := runNode(t, nenv, 2*time.Minute, "node", "oauth.mjs", e.base, is.clientID, is.clientSecret)
	if err != nil {
		t.Fatalf("node oauth.mjs: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	t.Logf("TypeScript SDK: %s", lines[len(lines)-1])
	var sum struct {
		Discovery map[string]struct {
			Status                 int      `json:"status"`
			ResourceMetadata       string   `json:"resource_metadata"`
			Resource               string   `json:"resource"`
			AuthorizationServers   []string `json:"authorization_servers"`
			BearerMethodsSupported []string `json:"bearer_methods_supported"`
			Issuer                 string   `json:"issuer"`
			TokenEndpoint          string   `json:"token_endpoint"`
		} `json:"discovery"`
		Connect map[string]struct {
			Server  string `json:"server"`
			IsError bool   `json:"isError"`
			Text    string `json:"text"`
			Token   bool   `json:"token"`
		} `json:"connect"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		t.Fatalf("summary: %v\n%s", err, out)
	}
	for _, path := range []string{"/mcp", "/mcp/sse"} {
		d := sum.Discovery[path]
		if d.Status != http.StatusUnauthorized || d.ResourceMetadata != public+"/.well-known/oauth-protected-resource"+path {
			t.Errorf("%s: got %d with resource_metadata %q, want 401 pointing at %s", path, d.Status, d.ResourceMetadata,
				public+"/.well-known/oauth-protected-resource"+path)
		}
		if d.Resource != public+path || len(d.AuthorizationServers) != 1 || d.AuthorizationServers[0] != is.url ||
			strings.Join(d.BearerMethodsSupported, ",") != "header" {
			t.Errorf("%s: got resource %q, authorization servers %q, bearer methods %q; want %s, [%s], [header]",
				path, d.Resource, d.AuthorizationServers, d.BearerMethodsSupported, public+path, is.url)
		}
		if d.Issuer != is.url || d.TokenEndpoint != is.url+"/token" {
			t.Errorf("%s: got issuer %q, token endpoint %q; want the test issuer's", path, d.Issuer, d.TokenEndpoint)
		}
		c := sum.Connect[path]
		if c.Server != "lakegate" || c.IsError || !c.Token || !strings.Contains(c.Text, "50") {
			t.Errorf("%s: got %+v, want lakegate answering run_sql (50 devices) under the issuer's token", path, c)
		}
	}
	// The SDK asked for a token for the resource the metadata named.
	if got := strings.Join(is.issued(), " "); got != public+"/mcp "+public+"/mcp/sse" {
		t.Errorf("tokens issued for %q, want %s/mcp then %s/mcp/sse", got, public, public)
	}
}

// TestOAuthTokensOverHTTP: the issuer's tokens open every route when aud
// names this server, and are refused otherwise; the server's own tokens
// still work; the metadata needs no token.
func TestOAuthTokensOverHTTP(t *testing.T) {
	e, is, public := startOAuth(t)
	claims := func(aud any, iss string) jwt.MapClaims {
		return jwt.MapClaims{"iss": iss, "sub": "agent-1", "aud": aud, "roles": []string{"reader"}, "exp": time.Now().Add(time.Hour).Unix()}
	}
	mint := func(c jwt.MapClaims) string {
		tok, err := is.sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, tc := range []struct {
		name, tok string
		code      int
		msg       string
	}{
		{"aud /mcp", mint(claims(public+"/mcp", is.url)), 200, ""},
		{"aud the server", mint(claims(public, is.url)), 200, ""},
		{"wrong aud", mint(claims("http://127.0.0.1:1/mcp", is.url)), 401, "audience"},
		{"unknown iss", mint(claims(public+"/mcp", "http://127.0.0.1:1")), 401, "signature"},
		{"server token", token("local", "reader"), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, e.base+"/rest/databases", tc.tok)
			if tc.code == http.StatusUnauthorized {
				wantRefused(t, code, body, tc.msg)
			} else if code != tc.code {
				t.Errorf("got %d %s, want %d", code, body, tc.code)
			}
		})
	}
	t.Run("MCP session over SSE", func(t *testing.T) {
		cs := e.connect(t, mint(claims(public+"/mcp/sse", is.url)))
		if _, err := cs.ListTools(t.Context(), nil); err != nil {
			t.Fatalf("list tools: %v", err)
		}
	})
	for _, p := range []string{"", "/mcp", "/mcp/sse"} {
		resp, err := http.Get(e.base + "/.well-known/oauth-protected-resource" + p)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Resource string }
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || doc.Resource != public+p {
			t.Errorf("metadata%s: got %d %+v (%v), want 200 naming %s", p, resp.StatusCode, doc, err, public+p)
		}
	}
}
