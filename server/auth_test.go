package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

func TestNewToken(t *testing.T) {
	secret := []byte(testSecret)
	tests := []struct {
		name    string
		secret  []byte
		subject string
		role    string
		ttl     time.Duration
		wantErr string
	}{
		{name: "reader", secret: secret, subject: "alice", role: lakegate.RoleReader, ttl: time.Hour},
		{name: "writer", secret: secret, subject: "bob", role: lakegate.RoleWriter, ttl: time.Minute},
		{name: "admin", secret: secret, subject: "root", role: lakegate.RoleAdmin, ttl: 24 * time.Hour},
		{name: "short secret", secret: secret[:31], subject: "a", role: lakegate.RoleReader, ttl: time.Hour, wantErr: "32"},
		{name: "empty subject", secret: secret, role: lakegate.RoleReader, ttl: time.Hour, wantErr: "subject"},
		{name: "unknown role", secret: secret, subject: "a", role: "root", ttl: time.Hour, wantErr: "reader, writer, admin"},
		{name: "zero ttl", secret: secret, subject: "a", role: lakegate.RoleReader, wantErr: "ttl"},
		{name: "negative ttl", secret: secret, subject: "a", role: lakegate.RoleReader, ttl: -time.Second, wantErr: "ttl"},
	}
	cfg := config.Default()
	cfg.JWTSecret = testSecret
	v, err := newVerifier(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.close)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := NewToken(tt.secret, tt.subject, tt.role, tt.ttl)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v, want an error containing %q", tok, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewToken: %v", err)
			}
			c, err := v.verify(t.Context(), tok)
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if c.Subject != tt.subject || len(c.Roles) != 1 || c.Roles[0] != tt.role {
				t.Errorf("got %+v, want subject %s with role %s", c, tt.subject, tt.role)
			}
		})
	}
}

// sign makes an HS256 token with claims, signed with key.
func sign(t *testing.T, key string, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// forge makes a token with the given alg header, HMAC-signed with the
// server's secret anyway (an algorithm-confusion attempt).
func forge(alg, payload string) string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"`+alg+`","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write([]byte(head))
	return head + "." + enc.EncodeToString(mac.Sum(nil))
}

func TestAuthenticate(t *testing.T) {
	st := newStack(t, nil)
	now := time.Now()
	exp := now.Add(time.Hour).Unix()
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "a", "role": "admin", "exp": exp}).
		SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, header, wantMsg string
	}{
		{"missing header", "", "missing bearer token"},
		{"wrong scheme", "Basic YTpi", "missing bearer token"},
		{"empty bearer", "Bearer   ", "missing bearer token"},
		{"no space", "Bearer", "missing bearer token"},
		{"garbage", "Bearer not.a.jwt", "invalid bearer token"},
		{"expired", "Bearer " + sign(t, testSecret, jwt.MapClaims{"sub": "a", "role": "reader", "exp": now.Add(-time.Hour).Unix()}), "expired"},
		{"no exp", "Bearer " + sign(t, testSecret, jwt.MapClaims{"sub": "a", "role": "reader"}), "no exp"},
		{"wrong key", "Bearer " + sign(t, strings.Repeat("k", 40), jwt.MapClaims{"sub": "a", "role": "reader", "exp": exp}), "signature"},
		{"alg none", "Bearer " + none, "signature"},
		{"rs256 header", "Bearer " + forge("RS256", fmt.Sprintf(`{"sub":"a","role":"admin","exp":%d}`, exp)), "signature"},
		{"no sub", "Bearer " + sign(t, testSecret, jwt.MapClaims{"role": "admin", "exp": exp}), "no sub"},
		{"iat an hour ahead", "Bearer " + sign(t, testSecret, jwt.MapClaims{"sub": "a", "role": "reader", "exp": exp, "iat": now.Add(time.Hour).Unix()}), "issued in the future"},
		{"nbf an hour ahead", "Bearer " + sign(t, testSecret, jwt.MapClaims{"sub": "a", "role": "reader", "exp": exp, "nbf": now.Add(time.Hour).Unix()}), "not valid yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/rest/databases", "/admin/mcp/status", "/mcp/sse"} {
				hdr := []string{}
				if tt.header != "" {
					hdr = []string{"Authorization", tt.header}
				}
				r := st.do(t, "GET", path, "", "", hdr...)
				if r.code != http.StatusUnauthorized {
					t.Fatalf("%s: got %d %s, want 401", path, r.code, r.body)
				}
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("%s: got WWW-Authenticate %q, want Bearer ...", path, got)
				}
				e := r.errBody(t)
				if e.Error.Kind != lakegate.KindAuth || !strings.Contains(e.Error.Message, tt.wantMsg) {
					t.Errorf("%s: got %+v, want kind auth_error with %q", path, e.Error, tt.wantMsg)
				}
			}
		})
	}

	t.Run("health needs no token", func(t *testing.T) {
		if r := st.do(t, "GET", "/health", "", ""); r.code != http.StatusOK || !strings.Contains(string(r.body), `"ok"`) {
			t.Errorf("got %d %s, want 200 ok", r.code, r.body)
		}
	})
	t.Run("scheme is case-insensitive", func(t *testing.T) {
		r := st.do(t, "GET", "/rest/databases", "", "", "Authorization", "bearer "+token("a", lakegate.RoleReader))
		if r.code != http.StatusOK {
			t.Errorf("got %d %s, want 200", r.code, r.body)
		}
	})
	t.Run("forge with HS256 is accepted", func(t *testing.T) {
		// Proves the rs256 header case fails only because of its alg.
		tok := forge("HS256", fmt.Sprintf(`{"sub":"a","role":"reader","exp":%d}`, exp))
		if r := st.do(t, "GET", "/rest/databases", tok, ""); r.code != http.StatusOK {
			t.Errorf("got %d %s, want 200", r.code, r.body)
		}
	})
	t.Run("iat within leeway", func(t *testing.T) {
		tok := sign(t, testSecret, jwt.MapClaims{"sub": "a", "role": "reader", "exp": exp, "iat": now.Add(2 * time.Second).Unix()})
		if r := st.do(t, "GET", "/rest/databases", tok, ""); r.code != http.StatusOK {
			t.Errorf("got %d %s, want 200", r.code, r.body)
		}
	})
	t.Run("expired within leeway", func(t *testing.T) {
		tok := sign(t, testSecret, jwt.MapClaims{"sub": "a", "role": "reader", "exp": now.Add(-5 * time.Second).Unix()})
		if r := st.do(t, "GET", "/rest/databases", tok, ""); r.code != http.StatusOK {
			t.Errorf("got %d %s, want 200", r.code, r.body)
		}
	})
}

func TestRoles(t *testing.T) {
	st := newStack(t, nil)
	exp := time.Now().Add(time.Hour).Unix()
	toks := map[string]string{
		"reader":       token("r", lakegate.RoleReader),
		"writer":       token("w", lakegate.RoleWriter),
		"admin":        token("a", lakegate.RoleAdmin),
		"no role":      sign(t, testSecret, jwt.MapClaims{"sub": "n", "exp": exp}),
		"unknown role": sign(t, testSecret, jwt.MapClaims{"sub": "u", "role": "root", "exp": exp}),
		"roles list":   sign(t, testSecret, jwt.MapClaims{"sub": "l", "roles": []string{"reader", "writer"}, "exp": exp}),
	}
	tests := []struct {
		tok, method, path, body string
		want                    int
	}{
		{"reader", "GET", "/rest/databases", "", 200},
		{"reader", "POST", "/data/demo/devices", "[1]", 403},
		{"reader", "GET", "/admin/mcp/status", "", 403},
		{"reader", "POST", "/admin/mcp/disable", "", 403},
		{"reader", "POST", "/admin/mcp/tools/reload", "", 403},
		{"reader", "GET", "/admin/rollups", "", 403},
		{"writer", "POST", "/admin/rollups/build", "", 403},
		{"admin", "GET", "/admin/rollups", "", 200},
		{"admin", "POST", "/admin/rollups/build", "", 404}, // the demo has none
		{"writer", "GET", "/rest/databases", "", 403},
		{"writer", "POST", "/data/demo/devices", "[1]", 400}, // past the role check
		{"writer", "GET", "/admin/mcp/status", "", 403},
		{"writer", "GET", "/mcp/sse", "", 403},
		{"admin", "GET", "/rest/databases", "", 200},
		{"admin", "POST", "/data/demo/devices", "[1]", 400},
		{"admin", "GET", "/admin/mcp/status", "", 200},
		{"no role", "GET", "/rest/databases", "", 403},
		{"unknown role", "GET", "/rest/databases", "", 403},
		{"roles list", "GET", "/rest/databases", "", 200},
		{"roles list", "POST", "/data/demo/devices", "[1]", 400},
		{"roles list", "GET", "/admin/mcp/status", "", 403},
	}
	for _, tt := range tests {
		t.Run(tt.tok+" "+tt.method+" "+tt.path, func(t *testing.T) {
			r := st.do(t, tt.method, tt.path, toks[tt.tok], tt.body)
			if r.code != tt.want {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tt.want)
			}
			if tt.want == http.StatusForbidden {
				if e := r.errBody(t); e.Error.Kind != lakegate.KindForbidden {
					t.Errorf("got kind %v, want %v", e.Error.Kind, lakegate.KindForbidden)
				}
			}
		})
	}
}

// fakeReplicas reads ReplicaHeader as "subject:role,role" (a good
// signature) or "forged" (a bad one).
type fakeReplicas struct{}

const replicaHeader = "X-Lakegate-Replica"

func (fakeReplicas) Caller(r *http.Request) (lakegate.Caller, bool, error) {
	h := r.Header.Get(replicaHeader)
	switch h {
	case "":
		return lakegate.Caller{}, false, nil
	case "forged":
		return lakegate.Caller{}, true, lakegate.Errorf(lakegate.KindAuth, "the request's replica signature is not valid")
	}
	sub, roles, _ := strings.Cut(h, ":")
	return lakegate.Caller{Subject: sub, Roles: strings.Split(roles, ",")}, true, nil
}
func (fakeReplicas) Prefix() string                                          { return "0a0b0c0d" }
func (fakeReplicas) Forward(http.ResponseWriter, *http.Request, string) bool { return false }
func (fakeReplicas) Gather(context.Context, string, string) [][]byte         { return nil }
func (fakeReplicas) Forwarded(*http.Request) bool                            { return false }

var _ Replicas = fakeReplicas{}

// TestReplicaSignatureRoutes: another replica's signature opens a block
// read as a reader, and nothing else.
func TestReplicaSignatureRoutes(t *testing.T) {
	st := newStackWith(t, nil, fakeReplicas{})
	reader := token("alice", lakegate.RoleReader)
	tests := []struct {
		name, method, path, signature, tok, body string
		wantCode                                 int
		wantMsg                                  string
	}{
		// The block routes: the signature is the caller, as a reader.
		{name: "manifest, signed reader", method: "GET", path: "/mcp/blocks/0a0b0c0dffff", signature: "alice:reader", wantCode: http.StatusNotFound},
		{name: "block, signed reader", method: "GET", path: "/mcp/blocks/0a0b0c0dffff/0", signature: "alice:reader", wantCode: http.StatusNotFound},
		{name: "block, signed admin only", method: "GET", path: "/mcp/blocks/0a0b0c0dffff/0", signature: "alice:admin", wantCode: http.StatusForbidden},
		{name: "block, signed writer only", method: "GET", path: "/mcp/blocks/0a0b0c0dffff/0", signature: "alice:writer", wantCode: http.StatusForbidden},
		{name: "block, forged", method: "GET", path: "/mcp/blocks/0a0b0c0dffff/0", signature: "forged", wantCode: http.StatusUnauthorized, wantMsg: "not valid"},
		{name: "block, HEAD", method: "HEAD", path: "/mcp/blocks/0a0b0c0dffff/0", signature: "alice:reader", wantCode: http.StatusUnauthorized},
		{name: "block, signature and bearer", method: "GET", path: "/mcp/blocks/0a0b0c0dffff/0", signature: "alice:reader", tok: reader, wantCode: http.StatusUnauthorized, wantMsg: "one credential"},
		// A job's route, read or cancelled for its caller.
		{name: "job, signed reader", method: "GET", path: "/mcp/jobs/0a0b0c0dffff", signature: "alice:reader", wantCode: http.StatusNotFound},
		{name: "job cancel, signed reader", method: "DELETE", path: "/mcp/jobs/0a0b0c0dffff", signature: "alice:reader", wantCode: http.StatusNotFound},
		{name: "jobs list, signed", method: "GET", path: "/mcp/jobs", signature: "alice:reader", wantCode: http.StatusUnauthorized, wantMsg: "block reads and job status only"},
		// Everywhere else a signature is refused, with or without a bearer.
		{name: "admin switch", method: "POST", path: "/admin/mcp/disable", signature: "root:admin", wantCode: http.StatusUnauthorized, wantMsg: "block reads and job status only"},
		{name: "admin status", method: "GET", path: "/admin/mcp/status", signature: "root:admin,reader", wantCode: http.StatusUnauthorized, wantMsg: "block reads and job status only"},
		{name: "console sessions", method: "GET", path: "/console/api/sessions", signature: "root:admin", wantCode: http.StatusUnauthorized, wantMsg: "block reads and job status only"},
		{name: "console transfers", method: "GET", path: "/console/api/transfers", signature: "alice:reader", wantCode: http.StatusUnauthorized, wantMsg: "block reads and job status only"},
		{name: "rest sql", method: "POST", path: "/rest/sql", signature: "alice:reader", body: `{"database":"demo","sql":"SELECT 1"}`, wantCode: http.StatusUnauthorized, wantMsg: "block reads and job status only"},
		{name: "rest databases", method: "GET", path: "/rest/databases", signature: "alice:reader", wantCode: http.StatusUnauthorized, wantMsg: "block reads and job status only"},
		{name: "ingest", method: "POST", path: "/data/demo/devices", signature: "w:writer", body: `[]`, wantCode: http.StatusUnauthorized, wantMsg: "block reads and job status only"},
		{name: "command", method: "POST", path: "/", signature: "root:admin", wantCode: http.StatusUnauthorized, wantMsg: "block reads and job status only"},
		{name: "mcp sse", method: "GET", path: "/mcp/sse", signature: "alice:reader", wantCode: http.StatusUnauthorized, wantMsg: "block reads and job status only"},
		{name: "mcp streamable", method: "POST", path: "/mcp", signature: "alice:reader", body: `{}`, wantCode: http.StatusUnauthorized, wantMsg: "block reads and job status only"},
		{name: "admin switch, with a bearer", method: "POST", path: "/admin/mcp/disable", signature: "root:admin", tok: token("root", lakegate.RoleAdmin), wantCode: http.StatusUnauthorized},
		{name: "admin switch, forged", method: "POST", path: "/admin/mcp/disable", signature: "forged", wantCode: http.StatusUnauthorized},
		// Without a signature nothing changes.
		{name: "rest databases, bearer", method: "GET", path: "/rest/databases", tok: reader, wantCode: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.signature != "" {
				hdr = []string{replicaHeader, tt.signature}
			}
			r := st.do(t, tt.method, tt.path, tt.tok, tt.body, hdr...)
			if r.code != tt.wantCode {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tt.wantCode)
			}
			if tt.wantMsg != "" {
				if e := r.errBody(t); e.Error.Kind != lakegate.KindAuth || !strings.Contains(e.Error.Message, tt.wantMsg) {
					t.Errorf("got %+v, want kind auth_error with %q", e.Error, tt.wantMsg)
				}
			}
		})
	}
	if !st.plugin.Enabled() {
		t.Error("got the plugin disabled, want it on: a signature switched it")
	}
}
