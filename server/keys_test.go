package server

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

// writePEM writes one PEM block to a temporary file.
func writePEM(t *testing.T, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func pkixDER(t *testing.T, pub crypto.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestReadPublicKey(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edPrivDER, err := x509.MarshalPKCS8PrivateKey(edPriv)
	if err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("ssh-ed25519 AAAA"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, wantAlg, wantErr string
	}{
		{name: "rsa pkix", path: writePEM(t, "PUBLIC KEY", pkixDER(t, rsaKey.Public())), wantAlg: "RS256"},
		{name: "rsa pkcs1", path: writePEM(t, "RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey)), wantAlg: "RS256"},
		{name: "ed25519", path: writePEM(t, "PUBLIC KEY", pkixDER(t, edPub)), wantAlg: "EdDSA"},
		{name: "p256", path: writePEM(t, "PUBLIC KEY", pkixDER(t, p256.Public())), wantAlg: "ES256"},
		{name: "small rsa", path: writePEM(t, "PUBLIC KEY", pkixDER(t, small.Public())), wantErr: "at least 2048 bits"},
		{name: "p384", path: writePEM(t, "PUBLIC KEY", pkixDER(t, p384.Public())), wantErr: "ECDSA P-256"},
		{name: "private key", path: writePEM(t, "PRIVATE KEY", edPrivDER), wantErr: "private key"},
		{name: "other block", path: writePEM(t, "X509 CRL", []byte{1}), wantErr: "want PUBLIC KEY"},
		{name: "not pem", path: notPEM, wantErr: "no PEM block"},
		{name: "missing file", path: filepath.Join(t.TempDir(), "nope.pem"), wantErr: "no such file"},
		{name: "garbage der", path: writePEM(t, "PUBLIC KEY", []byte{1, 2, 3}), wantErr: "parse PUBLIC KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alg, _, err := readPublicKey(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %s, %v, want an error containing %q", alg, err, tt.wantErr)
				}
				return
			}
			if err != nil || alg != tt.wantAlg {
				t.Errorf("got %s, %v, want %s", alg, err, tt.wantAlg)
			}
		})
	}
}

func TestNewAuthConfig(t *testing.T) {
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edFile := writePEM(t, "PUBLIC KEY", pkixDER(t, edPub))

	t.Run("no way to authenticate", func(t *testing.T) {
		cfg := config.Default()
		engine, plugin := newEngine(t)
		_, err := New(cfg, engine, plugin, nil)
		if err == nil || !strings.Contains(err.Error(), "jwt_secret") || !strings.Contains(err.Error(), "jwt_jwks_url") {
			t.Errorf("got %v, want an error naming the settings", err)
		}
	})
	t.Run("bad key file names the setting", func(t *testing.T) {
		cfg := config.Default()
		cfg.JWTPublicKeyFiles = []string{edFile, filepath.Join(t.TempDir(), "missing.pem")}
		engine, plugin := newEngine(t)
		_, err := New(cfg, engine, plugin, nil)
		if err == nil || !strings.Contains(err.Error(), "jwt_public_key_files[1]") {
			t.Errorf("got %v, want an error naming jwt_public_key_files[1]", err)
		}
	})
	t.Run("public key without a secret", func(t *testing.T) {
		st := newStack(t, func(c *config.Config) {
			c.JWTSecret = ""
			c.JWTPublicKeyFiles = []string{edFile}
		})
		claims := jwt.MapClaims{"sub": "e", "roles": []string{"reader"}, "exp": time.Now().Add(time.Hour).Unix()}
		ed, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(edPriv)
		if err != nil {
			t.Fatal(err)
		}
		if r := st.do(t, "GET", "/rest/databases", ed, ""); r.code != http.StatusOK {
			t.Errorf("EdDSA: got %d %s, want 200", r.code, r.body)
		}
		r := st.do(t, "GET", "/rest/databases", token("h", lakegate.RoleReader), "")
		if r.code != http.StatusUnauthorized || !strings.Contains(string(r.body), "accepted algorithms: EdDSA") {
			t.Errorf("HS256: got %d %s, want 401 naming EdDSA", r.code, r.body)
		}
		r = st.do(t, "GET", "/rest/databases", "", "")
		if strings.Contains(string(r.body), "lakegate token") {
			t.Errorf("got %s: no hint at the HS256 token command without a secret", r.body)
		}
	})
}

func TestRolesClaim(t *testing.T) {
	tests := []struct {
		name   string
		claim  string
		claims jwt.MapClaims
		want   []string
		bad    bool
	}{
		{name: "default list", claim: "roles", claims: jwt.MapClaims{"roles": []any{"reader", "writer"}}, want: []string{"reader", "writer"}},
		{name: "default reads role too", claim: "roles", claims: jwt.MapClaims{"role": "admin"}, want: []string{"admin"}},
		{name: "default string", claim: "roles", claims: jwt.MapClaims{"roles": "reader"}, want: []string{"reader"}},
		{name: "custom ignores role", claim: "groups", claims: jwt.MapClaims{"role": "admin", "groups": []any{"reader"}}, want: []string{"reader"}},
		{name: "dotted name as a key", claim: "https://lakegate.test/roles", claims: jwt.MapClaims{"https://lakegate.test/roles": []any{"reader"}}, want: []string{"reader"}},
		{name: "nested path", claim: "realm_access.roles", claims: jwt.MapClaims{"realm_access": map[string]any{"roles": []any{"writer"}}}, want: []string{"writer"}},
		{name: "missing", claim: "groups", claims: jwt.MapClaims{}, want: nil},
		{name: "path through a string", claim: "a.b", claims: jwt.MapClaims{"a": "x"}, want: nil},
		{name: "number", claim: "roles", claims: jwt.MapClaims{"roles": 3.0}, bad: true},
		{name: "list of numbers", claim: "roles", claims: jwt.MapClaims{"roles": []any{"reader", 1.0}}, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &verifier{rolesClaim: tt.claim}
			got, err := v.roles(tt.claims)
			if tt.bad {
				if err == nil || !strings.Contains(err.Error(), tt.claim) {
					t.Errorf("got %v, %v, want an error naming the claim", got, err)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("got %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}

// TestSecretsNotLogged sends good, bad and expired tokens and checks that
// neither the secret nor a token shows in the logs or the answers.
func TestSecretsNotLogged(t *testing.T) {
	st := newStack(t, nil)
	exp := time.Now().Add(time.Hour).Unix()
	toks := []string{
		token("alice", lakegate.RoleReader),
		token("root", lakegate.RoleAdmin),
		sign(t, testSecret, jwt.MapClaims{"sub": "a", "role": "reader", "exp": time.Now().Add(-time.Hour).Unix()}),
		sign(t, strings.Repeat("w", 40), jwt.MapClaims{"sub": "a", "role": "reader", "exp": exp}),
		sign(t, testSecret, jwt.MapClaims{"sub": "a", "role": "reader"}),
	}
	var answers strings.Builder
	for _, tok := range toks {
		for _, path := range []string{"/rest/databases", "/admin/mcp/status", "/rest/databases/nope/tables"} {
			r := st.do(t, "GET", path, tok, "")
			answers.Write(r.body)
			for k, v := range r.header {
				answers.WriteString(k + ": " + strings.Join(v, ",") + "\n")
			}
		}
	}
	logs := st.logs.String()
	if !strings.Contains(logs, "/rest/databases") {
		t.Fatalf("got logs %q, want the requests logged", logs)
	}
	for _, secret := range append([]string{testSecret}, toks...) {
		// A token's signature alone would be a leak too.
		sig := secret[strings.LastIndexByte(secret, '.')+1:]
		for name, text := range map[string]string{"logs": logs, "answers": answers.String()} {
			if strings.Contains(text, secret) || strings.Contains(text, sig) {
				t.Errorf("%s hold a secret or token", name)
			}
		}
	}
}
