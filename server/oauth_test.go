package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

// testIssuer is a small OAuth authorization server on loopback: metadata
// at one of the well-known locations and a JWK Set with one ES256 key.
type testIssuer struct {
	srv    *httptest.Server
	issuer string
	key    *ecdsa.PrivateKey
	// metadata counts the metadata documents served.
	metadata atomic.Int32
}

// newTestIssuer serves an issuer at path ("" for the root) whose metadata
// sits at metaPath(issuer's path), naming issuer named (the issuer itself
// when named is "").
func newTestIssuer(t *testing.T, path string, metaPath func(issuerPath string) string, named string) *testIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ti := &testIssuer{key: key}
	mux := http.NewServeMux()
	ti.srv = httptest.NewServer(mux)
	t.Cleanup(ti.srv.Close)
	ti.issuer = ti.srv.URL + path
	if named == "" {
		named = ti.issuer
	}
	mux.HandleFunc("GET "+metaPath(strings.TrimSuffix(path, "/")), func(w http.ResponseWriter, _ *http.Request) {
		ti.metadata.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": named, "jwks_uri": ti.srv.URL + "/jwks",
			"token_endpoint": ti.srv.URL + "/token", "response_types_supported": []string{"code"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		pt, err := key.PublicKey.Bytes() // 0x04 || X || Y
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		x, y := pt[1:33], pt[33:]
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{
			{"kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256", "use": "sig", "x": b64(x), "y": b64(y)}}})
	})
	return ti
}

func oauthMeta(p string) string { return "/.well-known/oauth-authorization-server" + p }

// sign makes an ES256 token with claims, signed with key (the issuer's
// when nil), with kid k1.
func (ti *testIssuer) sign(t *testing.T, key *ecdsa.PrivateKey, claims jwt.MapClaims) string {
	t.Helper()
	if key == nil {
		key = ti.key
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const testPublicURL = "https://lakegate.example.com"

// oauthStack is a stack with the issuers as its authorization servers.
func oauthStack(t *testing.T, issuers ...string) *stack {
	t.Helper()
	st := newStack(t, func(c *config.Config) {
		c.AuthorizationServers = issuers
		c.PublicURL = testPublicURL + "/" // the slash is dropped
	})
	return st
}

func TestOAuthUnset(t *testing.T) {
	st := newStack(t, nil)
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		if r := st.do(t, "GET", p, "", ""); r.code != http.StatusNotFound {
			t.Errorf("GET %s: got %d %s, want 404", p, r.code, r.body)
		}
	}
	r := st.do(t, "POST", "/mcp", "", "{}")
	if got := r.header.Get("WWW-Authenticate"); r.code != http.StatusUnauthorized || got != `Bearer realm="lakegate"` {
		t.Errorf("got %d with WWW-Authenticate %q, want 401 with Bearer realm=\"lakegate\"", r.code, got)
	}
}

func TestOAuthMetadata(t *testing.T) {
	const as1, as2 = "https://auth.example.com", "https://login.example.org/tenant1"
	st := oauthStack(t, as1, as2)
	for _, tc := range []struct{ path, resource string }{
		{"/.well-known/oauth-protected-resource", testPublicURL},
		{"/.well-known/oauth-protected-resource/mcp", testPublicURL + "/mcp"},
		{"/.well-known/oauth-protected-resource/mcp/sse", testPublicURL + "/mcp/sse"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := st.do(t, "GET", tc.path, "", "")
			if r.code != http.StatusOK {
				t.Fatalf("got %d %s, want 200 without a token", r.code, r.body)
			}
			var doc map[string]any
			r.decode(t, &doc)
			want := map[string]any{"resource": tc.resource, "authorization_servers": []any{as1, as2},
				"bearer_methods_supported": []any{"header"}, "resource_name": "lakegate"}
			if got, _ := json.Marshal(doc); string(got) != string(must(json.Marshal(want))) {
				t.Errorf("got %s, want %s", got, must(json.Marshal(want)))
			}
			if got := r.header.Get("Access-Control-Allow-Origin"); got != "*" {
				t.Errorf("got Access-Control-Allow-Origin %q, want *", got)
			}
		})
	}
	if r := st.do(t, "GET", "/.well-known/oauth-protected-resource/rest", "", ""); r.code != http.StatusNotFound {
		t.Errorf("metadata of an unknown resource: got %d, want 404", r.code)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestOAuthChallenge(t *testing.T) {
	st := oauthStack(t, "https://auth.example.com")
	const meta = testPublicURL + "/.well-known/oauth-protected-resource"
	for _, tc := range []struct{ method, path, tok, want string }{
		{"POST", "/mcp", "", meta + "/mcp"},
		{"GET", "/mcp/sse", "", meta + "/mcp/sse"},
		{"POST", "/mcp/messages/?session_id=x", "", meta + "/mcp/sse"},
		{"GET", "/rest/databases", "", meta},
		{"POST", "/", "", meta},
		{"GET", "/admin/mcp/status", "not-a-jwt", meta},
		{"POST", "/mcp", "not-a-jwt", meta + "/mcp"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := st.do(t, tc.method, tc.path, tc.tok, "")
			want := `Bearer realm="lakegate", resource_metadata="` + tc.want + `"`
			if got := r.header.Get("WWW-Authenticate"); r.code != http.StatusUnauthorized || got != want {
				t.Errorf("got %d with WWW-Authenticate %q, want 401 with %q", r.code, got, want)
			}
		})
	}
	// Other refusals carry no challenge.
	if r := st.do(t, "GET", "/admin/mcp/status", token("r", lakegate.RoleReader), ""); r.code != http.StatusForbidden || r.header.Get("WWW-Authenticate") != "" {
		t.Errorf("403: got %d with WWW-Authenticate %q, want none", r.code, r.header.Get("WWW-Authenticate"))
	}
}

func TestOAuthTokens(t *testing.T) {
	ti := newTestIssuer(t, "", oauthMeta, "")
	st := oauthStack(t, ti.issuer)
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	claims := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": ti.issuer, "sub": "client-1", "aud": testPublicURL + "/mcp",
			"roles": []string{lakegate.RoleReader}, "exp": time.Now().Add(time.Hour).Unix()}
		if change != nil {
			change(c)
		}
		return c
	}
	aud := func(a any) func(jwt.MapClaims) { return func(c jwt.MapClaims) { c["aud"] = a } }
	for _, tc := range []struct {
		name string
		tok  string
		code int
		msg  string
	}{
		{"aud /mcp", ti.sign(t, nil, claims(nil)), 200, ""},
		{"aud /mcp/sse", ti.sign(t, nil, claims(aud(testPublicURL+"/mcp/sse"))), 200, ""},
		{"aud root", ti.sign(t, nil, claims(aud(testPublicURL))), 200, ""},
		{"aud root with slash", ti.sign(t, nil, claims(aud(testPublicURL+"/"))), 200, ""},
		{"aud in a list", ti.sign(t, nil, claims(aud([]string{"api://other", testPublicURL + "/mcp"}))), 200, ""},
		{"wrong aud", ti.sign(t, nil, claims(aud("https://other.example.com/mcp"))), 401, "audience is not accepted"},
		{"aud of another path", ti.sign(t, nil, claims(aud(testPublicURL+"/rest"))), 401, "audience is not accepted"},
		{"no aud", ti.sign(t, nil, claims(func(c jwt.MapClaims) { delete(c, "aud") })), 401, "no aud claim"},
		{"unknown iss", ti.sign(t, nil, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" })), 401, "signature"},
		{"iss with a trailing slash", ti.sign(t, nil, claims(func(c jwt.MapClaims) { c["iss"] = ti.issuer + "/" })), 401, "signature"},
		{"no iss", ti.sign(t, nil, claims(func(c jwt.MapClaims) { delete(c, "iss") })), 401, "signature"},
		{"another key", ti.sign(t, other, claims(nil)), 401, "signature"},
		{"expired", ti.sign(t, nil, claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), 401, "expired"},
		{"no exp", ti.sign(t, nil, claims(func(c jwt.MapClaims) { delete(c, "exp") })), 401, "no exp claim"},
		{"HS256 claiming the issuer", sign(t, testSecret, claims(nil)), 401, "signature"},
		{"no role", ti.sign(t, nil, claims(func(c jwt.MapClaims) { delete(c, "roles") })), 403, ""},
		// The server's own tokens are untouched.
		{"server secret", token("alice", lakegate.RoleReader), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := st.do(t, "GET", "/rest/databases", tc.tok, "")
			if r.code != tc.code {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tc.code)
			}
			if tc.msg != "" {
				if e := r.errBody(t); e.Error.Kind != lakegate.KindAuth || !strings.Contains(e.Error.Message, tc.msg) {
					t.Errorf("got %s %q, want auth_error containing %q", e.Error.Kind, e.Error.Message, tc.msg)
				}
			}
		})
	}
	t.Run("the caller is the token's subject", func(t *testing.T) {
		c, err := st.srv.auth.verifier.verify(t.Context(), ti.sign(t, nil, claims(nil)))
		if err != nil || c.Subject != "client-1" || !slices.Equal(c.Roles, []string{lakegate.RoleReader}) {
			t.Errorf("got %+v, %v; want client-1 with [reader]", c, err)
		}
	})
	if n := ti.metadata.Load(); n != 1 {
		t.Errorf("metadata fetched %d times, want once", n)
	}
}

// TestOAuthDiscovery finds the keys wherever the metadata is, in the
// order MCP clients look, and refuses metadata that names another issuer.
func TestOAuthDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name     string
		path     string
		metaPath func(string) string
		named    string
		code     int
	}{
		{"RFC 8414 at the root", "", oauthMeta, "", 200},
		{"RFC 8414 with a path inserted", "/tenant1", oauthMeta, "", 200},
		{"OpenID inserted", "/tenant1", func(p string) string { return "/.well-known/openid-configuration" + p }, "", 200},
		{"OpenID appended", "/tenant1/", func(p string) string { return p + "/.well-known/openid-configuration" }, "", 200},
		{"OpenID at the root", "", func(string) string { return "/.well-known/openid-configuration" }, "", 200},
		{"metadata naming another issuer", "", oauthMeta, "https://evil.example.com", 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ti := newTestIssuer(t, tc.path, tc.metaPath, tc.named)
			st := oauthStack(t, ti.issuer)
			tok := ti.sign(t, nil, jwt.MapClaims{"iss": ti.issuer, "sub": "c", "aud": testPublicURL,
				"roles": []string{lakegate.RoleReader}, "exp": time.Now().Add(time.Hour).Unix()})
			r := st.do(t, "GET", "/rest/databases", tok, "")
			if r.code != tc.code {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tc.code)
			}
			if tc.code == http.StatusServiceUnavailable {
				if e := r.errBody(t); e.Error.Kind != lakegate.KindUnavailable || !strings.Contains(e.Error.Message, ti.issuer) {
					t.Errorf("got %s %q, want unavailable naming the issuer", e.Error.Kind, e.Error.Message)
				}
				if r.header.Get("Retry-After") == "" {
					t.Error("got no Retry-After")
				}
				if !strings.Contains(st.logs.String(), "names issuer") {
					t.Errorf("log: got %s, want the issuer mismatch", st.logs.String())
				}
			}
		})
	}
}

func TestMetadataURLs(t *testing.T) {
	for _, tc := range []struct {
		issuer string
		want   []string
	}{
		{"https://a.example.com", []string{"https://a.example.com/.well-known/oauth-authorization-server", "https://a.example.com/.well-known/openid-configuration"}},
		{"https://a.example.com/", []string{"https://a.example.com/.well-known/oauth-authorization-server", "https://a.example.com/.well-known/openid-configuration"}},
		{"https://a.example.com/t1/", []string{"https://a.example.com/.well-known/oauth-authorization-server/t1",
			"https://a.example.com/.well-known/openid-configuration/t1", "https://a.example.com/t1/.well-known/openid-configuration"}},
	} {
		if got := metadataURLs(tc.issuer); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.issuer, got, tc.want)
		}
	}
}
