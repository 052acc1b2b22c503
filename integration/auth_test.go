package integration

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testcert"
)

// writePublicPEM writes the public half of key as a PEM PUBLIC KEY file
// and returns its path and bytes.
func writePublicPEM(t *testing.T, pub crypto.PublicKey) (string, []byte) {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// signJWT signs claims with method and key; kid, when set, goes in the
// header.
func signJWT(t *testing.T, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// claimsFor are valid claims for subject with roles; change edits them.
func claimsFor(subject string, roles []string, change func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"sub": subject, "roles": roles, "exp": time.Now().Add(time.Hour).Unix()}
	if change != nil {
		change(c)
	}
	return c
}

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func edKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// authError is the error body of a refused request.
func authError(t *testing.T, body string) (kind, message string) {
	t.Helper()
	var b struct {
		Error struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return b.Error.Kind, b.Error.Message
}

// wantRefused checks a 401 with kind auth_error whose message holds want.
func wantRefused(t *testing.T, code int, body, want string) {
	t.Helper()
	if code != http.StatusUnauthorized {
		t.Fatalf("got %d %s, want 401", code, body)
	}
	if kind, msg := authError(t, body); kind != "auth_error" || !strings.Contains(msg, want) {
		t.Errorf("got %s %q, want auth_error containing %q", kind, msg, want)
	}
}

// TestJWTPublicKeys runs a server with no HS256 secret, an RS256 and an
// EdDSA public key, a required issuer and audience, and tries the tokens
// an attacker or a misconfigured issuer would send.
func TestJWTPublicKeys(t *testing.T) {
	rsaPriv, edPriv, stranger := rsaKey(t), edKey(t), rsaKey(t)
	rsaFile, rsaPEM := writePublicPEM(t, rsaPriv.Public())
	edFile, _ := writePublicPEM(t, edPriv.Public())
	const iss, aud = "https://idp.lakegate.test/", "lakegate"
	e := start(t, envOptions{config: func(c *config.Config) {
		c.JWTSecret = ""
		c.JWTPublicKeyFiles = []string{rsaFile, edFile}
		c.JWTIssuer, c.JWTAudience = iss, aud
	}})
	valid := func(change func(jwt.MapClaims)) jwt.MapClaims {
		return claimsFor("carol", []string{"reader"}, func(c jwt.MapClaims) {
			c["iss"], c["aud"] = iss, aud
			if change != nil {
				change(c)
			}
		})
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, valid(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	ok := []struct{ name, tok string }{
		{"RS256", signJWT(t, jwt.SigningMethodRS256, rsaPriv, "", valid(nil))},
		{"EdDSA", signJWT(t, jwt.SigningMethodEdDSA, edPriv, "", valid(nil))},
		{"audience in a list", signJWT(t, jwt.SigningMethodRS256, rsaPriv, "", valid(func(c jwt.MapClaims) { c["aud"] = []string{"other", aud} }))},
		{"expired within the leeway", signJWT(t, jwt.SigningMethodEdDSA, edPriv, "", valid(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-5 * time.Second).Unix() }))},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := get(t, e.base+"/rest/databases", tc.tok); code != http.StatusOK {
				t.Errorf("got %d %s, want 200", code, body)
			}
		})
	}
	refused := []struct{ name, tok, want string }{
		{"alg none", none, "signature"},
		{"HS256 signed with the RS256 public key", signJWT(t, jwt.SigningMethodHS256, rsaPEM, "", valid(nil)), "signature"},
		{"HS256 without a secret configured", signJWT(t, jwt.SigningMethodHS256, []byte(testSecret), "", valid(nil)), "accepted algorithms: EdDSA, RS256"},
		{"RS256 by another key", signJWT(t, jwt.SigningMethodRS256, stranger, "", valid(nil)), "signature"},
		{"RS384 with the right key", signJWT(t, jwt.SigningMethodRS384, rsaPriv, "", valid(nil)), "signature"},
		{"expired", signJWT(t, jwt.SigningMethodRS256, rsaPriv, "", valid(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), "expired"},
		{"missing exp", signJWT(t, jwt.SigningMethodRS256, rsaPriv, "", valid(func(c jwt.MapClaims) { delete(c, "exp") })), "no exp claim"},
		{"wrong audience", signJWT(t, jwt.SigningMethodRS256, rsaPriv, "", valid(func(c jwt.MapClaims) { c["aud"] = "someone-else" })), "audience"},
		{"missing audience", signJWT(t, jwt.SigningMethodEdDSA, edPriv, "", valid(func(c jwt.MapClaims) { delete(c, "aud") })), "no aud claim"},
		{"wrong issuer", signJWT(t, jwt.SigningMethodRS256, rsaPriv, "", valid(func(c jwt.MapClaims) { c["iss"] = "https://evil.test/" })), "issuer"},
		{"missing issuer", signJWT(t, jwt.SigningMethodEdDSA, edPriv, "", valid(func(c jwt.MapClaims) { delete(c, "iss") })), "no iss claim"},
		{"not yet valid", signJWT(t, jwt.SigningMethodRS256, rsaPriv, "", valid(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() })), "not valid yet"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/rest/databases", "/mcp/sse"} {
				code, body := get(t, e.base+path, tc.tok)
				wantRefused(t, code, body, tc.want)
			}
		})
	}
	t.Run("missing token names the ways in", func(t *testing.T) {
		code, body := get(t, e.base+"/rest/databases", "")
		wantRefused(t, code, body, "missing bearer token")
		if strings.Contains(body, "lakegate token") {
			t.Errorf("got %s: the token command does not apply without an HS256 secret", body)
		}
	})
}

// TestJWTAlgConfusionWithSecret: with both an HS256 secret and an RS256
// key, an HS256 token whose "secret" is the public key PEM is refused.
func TestJWTAlgConfusionWithSecret(t *testing.T) {
	rsaPriv := rsaKey(t)
	rsaFile, rsaPEM := writePublicPEM(t, rsaPriv.Public())
	e := start(t, envOptions{config: func(c *config.Config) { c.JWTPublicKeyFiles = []string{rsaFile} }})
	claims := claimsFor("mallory", []string{"admin"}, nil)
	code, body := get(t, e.base+"/admin/mcp/status", signJWT(t, jwt.SigningMethodHS256, rsaPEM, "", claims))
	wantRefused(t, code, body, "signature")
	for name, tok := range map[string]string{
		"HS256 with the secret": signJWT(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims),
		"RS256 with the key":    signJWT(t, jwt.SigningMethodRS256, rsaPriv, "", claims),
	} {
		if code, body := get(t, e.base+"/admin/mcp/status", tok); code != http.StatusOK {
			t.Errorf("%s: got %d %s, want 200", name, code, body)
		}
	}
}

// jwks serves a JWK Set that a test can replace.
type jwks struct {
	mu      sync.Mutex
	keys    []map[string]string
	fetches int
}

func (j *jwks) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.fetches++
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": j.keys})
}

func (j *jwks) set(keys ...map[string]string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.keys = keys
}

func (j *jwks) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.fetches
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, k *rsa.PublicKey) map[string]string {
	return map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
		"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

func edJWK(kid string, k ed25519.PublicKey) map[string]string {
	return map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": kid, "alg": "EdDSA", "use": "sig", "x": b64(k)}
}

// TestJWTJWKS serves the keys as a JWK Set from an httptest server, then
// rotates them.
func TestJWTJWKS(t *testing.T) {
	k1, k2, ed := rsaKey(t), rsaKey(t), edKey(t)
	set := &jwks{}
	set.set(rsaJWK("k1", &k1.PublicKey), edJWK("e1", ed.Public().(ed25519.PublicKey)))
	idp := httptest.NewServer(set)
	t.Cleanup(idp.Close)
	e := start(t, envOptions{config: func(c *config.Config) {
		c.JWTSecret = ""
		c.JWTJWKSURL = idp.URL + "/jwks.json"
	}})
	claims := claimsFor("dave", []string{"reader"}, nil)
	check := func(t *testing.T, tok string, want int, msg string) {
		t.Helper()
		code, body := get(t, e.base+"/rest/databases", tok)
		if want == http.StatusUnauthorized {
			wantRefused(t, code, body, msg)
		} else if code != want {
			t.Errorf("got %d %s, want %d", code, body, want)
		}
	}

	t.Run("RS256 by kid", func(t *testing.T) { check(t, signJWT(t, jwt.SigningMethodRS256, k1, "k1", claims), 200, "") })
	t.Run("EdDSA by kid", func(t *testing.T) { check(t, signJWT(t, jwt.SigningMethodEdDSA, ed, "e1", claims), 200, "") })
	t.Run("no kid: every key of the algorithm", func(t *testing.T) {
		check(t, signJWT(t, jwt.SigningMethodRS256, k1, "", claims), 200, "")
	})
	t.Run("kid of another algorithm", func(t *testing.T) {
		check(t, signJWT(t, jwt.SigningMethodEdDSA, ed, "k1", claims), 401, "signature")
	})
	t.Run("HS256 signed with the JWK's modulus", func(t *testing.T) {
		check(t, signJWT(t, jwt.SigningMethodHS256, k1.N.Bytes(), "k1", claims), 401, "signature")
	})
	t.Run("expired", func(t *testing.T) {
		old := claimsFor("dave", []string{"reader"}, func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })
		check(t, signJWT(t, jwt.SigningMethodRS256, k1, "k1", old), 401, "expired")
	})

	// Rotation: the issuer replaces k1 by k2. The first token with the new
	// kid makes the server fetch the set again; the old key is gone.
	before := set.count()
	set.set(rsaJWK("k2", &k2.PublicKey))
	t.Run("rotated key is fetched on its first use", func(t *testing.T) {
		check(t, signJWT(t, jwt.SigningMethodRS256, k2, "k2", claims), 200, "")
		if got := set.count(); got != before+1 {
			t.Errorf("got %d fetches, want %d", got, before+1)
		}
	})
	t.Run("retired key is refused", func(t *testing.T) {
		check(t, signJWT(t, jwt.SigningMethodRS256, k1, "k1", claims), 401, "kid")
	})
	t.Run("unknown kid is refused without another fetch", func(t *testing.T) {
		n := set.count()
		check(t, signJWT(t, jwt.SigningMethodRS256, k2, "no-such-kid", claims), 401, "kid")
		if got := set.count(); got != n {
			t.Errorf("got %d fetches, want %d (an unknown kid refreshes at most once a minute)", got, n)
		}
	})
}

// TestJWTRolesClaim reads roles from a nested claim.
func TestJWTRolesClaim(t *testing.T) {
	e := start(t, envOptions{config: func(c *config.Config) { c.JWTRolesClaim = "realm_access.roles" }})
	sign := func(c jwt.MapClaims) string { return signJWT(t, jwt.SigningMethodHS256, []byte(testSecret), "", c) }
	exp := time.Now().Add(time.Hour).Unix()
	for _, tc := range []struct {
		name string
		tok  string
		want int
	}{
		{"nested list", sign(jwt.MapClaims{"sub": "x", "exp": exp, "realm_access": map[string]any{"roles": []string{"offline", "reader"}}}), 200},
		{"nested string", sign(jwt.MapClaims{"sub": "x", "exp": exp, "realm_access": map[string]any{"roles": "reader"}}), 200},
		{"default claim not read", sign(jwt.MapClaims{"sub": "x", "exp": exp, "role": "reader", "roles": []string{"reader"}}), 403},
		{"not strings", sign(jwt.MapClaims{"sub": "x", "exp": exp, "realm_access": map[string]any{"roles": []int{1}}}), 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := get(t, e.base+"/rest/databases", tc.tok); code != tc.want {
				t.Errorf("got %d %s, want %d", code, body, tc.want)
			}
		})
	}
}

// roleToken is an HS256 token for subject with roles.
func roleToken(t *testing.T, subject string, roles ...string) string {
	t.Helper()
	return signJWT(t, jwt.SigningMethodHS256, []byte(testSecret), "", claimsFor(subject, roles, nil))
}

// toolError is the kind and message of an isError tool result.
func toolError(t *testing.T, res *mcpsdk.CallToolResult) (kind, message string) {
	t.Helper()
	if !res.IsError {
		t.Fatal("got a result, want an isError result")
	}
	return authError(t, res.Content[0].(*mcpsdk.TextContent).Text)
}

// TestAccessRules: role analyst may use database iot (not iot2) and read
// only readings there, over REST, the command interface and MCP.
func TestAccessRules(t *testing.T) {
	pgRole(t, "lg_it_readings", "readings")
	e := start(t, envOptions{config: func(c *config.Config) {
		c.Databases = append(c.Databases, config.Database{Name: "iot2", URL: appURL})
		c.Access = map[string]config.RoleAccess{
			"analyst": {Databases: []string{"iot"}, Tables: map[string][]string{"iot": {"readings"}}, PGRole: "lg_it_readings"},
		}
	}})
	ann := roleToken(t, "ann", "reader", "analyst")
	forbidden := func(t *testing.T, code int, body string, names ...string) {
		t.Helper()
		if code != http.StatusForbidden {
			t.Fatalf("got %d %s, want 403", code, body)
		}
		kind, msg := authError(t, body)
		if kind != "forbidden" {
			t.Errorf("got kind %s, want forbidden", kind)
		}
		for _, n := range append(names, "role analyst") {
			if !strings.Contains(msg, n) {
				t.Errorf("got %q, want it to name %s", msg, n)
			}
		}
	}

	t.Run("databases list", func(t *testing.T) {
		code, body := get(t, e.base+"/rest/databases", ann)
		if code != 200 || !strings.Contains(body, `"iot"`) || strings.Contains(body, `"iot2"`) {
			t.Errorf("got %d %s, want iot only", code, body)
		}
		code, body = get(t, e.base+"/rest/databases", token("root", "reader"))
		if code != 200 || !strings.Contains(body, `"iot2"`) {
			t.Errorf("without a rule: got %d %s, want iot2 listed", code, body)
		}
	})
	t.Run("tables list", func(t *testing.T) {
		code, body := get(t, e.base+"/rest/databases/iot/tables", ann)
		if code != 200 || !strings.Contains(body, `"readings"`) || strings.Contains(body, `"devices"`) {
			t.Errorf("got %d %s, want readings only", code, body)
		}
	})
	t.Run("database denied", func(t *testing.T) {
		code, body := get(t, e.base+"/rest/databases/iot2/tables", ann)
		forbidden(t, code, body, `"iot2"`)
		code, body = post(t, e.base+"/rest/sql", ann, `{"database":"iot2","sql":"SELECT 1"}`)
		forbidden(t, code, body, `"iot2"`)
	})
	t.Run("describe denied", func(t *testing.T) {
		code, body := get(t, e.base+"/rest/databases/iot/tables/devices", ann)
		forbidden(t, code, body, `"devices"`, `"iot"`)
	})
	t.Run("sql denied", func(t *testing.T) {
		for _, sql := range []string{
			"SELECT * FROM devices",
			"SELECT * FROM public.devices",
			"SELECT r.id FROM readings r WHERE r.device_id IN (SELECT id FROM devices WHERE site = 'oslo')",
		} {
			code, body := post(t, e.base+"/rest/sql", ann, fmt.Sprintf(`{"database":"iot","sql":%q}`, sql))
			forbidden(t, code, body, "devices", `"iot"`)
			code, body = post(t, e.base+"/rest/sql", ann, fmt.Sprintf(`{"database":"iot","sql":%q,"format":"ndjson"}`, sql))
			forbidden(t, code, body, "devices")
		}
	})
	t.Run("sql allowed", func(t *testing.T) {
		code, body := post(t, e.base+"/rest/sql", ann, `{"database":"iot","sql":"SELECT count(*) AS n FROM readings"}`)
		if code != 200 || !strings.Contains(body, "5000") {
			t.Errorf("got %d %s, want the count", code, body)
		}
	})
	t.Run("sql the checker cannot read", func(t *testing.T) {
		code, body := post(t, e.base+"/rest/sql", ann, `{"database":"iot","sql":"SELECT id::text FROM readings LIMIT 1"}`)
		if kind, msg := authError(t, body); code != 400 || kind != "validation_error" || !strings.Contains(msg, "allow-list") {
			t.Errorf("got %d %s %q, want a validation error naming the allow-list", code, kind, msg)
		}
	})

	t.Run("mcp tools", func(t *testing.T) {
		cs := e.connect(t, ann)
		var dbs struct {
			Databases []struct{ Name string } `json:"databases"`
		}
		callJSON(t, cs, "list_databases", map[string]any{}, &dbs)
		if len(dbs.Databases) != 1 || dbs.Databases[0].Name != "iot" {
			t.Errorf("list_databases: got %+v, want iot only", dbs)
		}
		var tables struct {
			Tables []struct{ Name string } `json:"tables"`
		}
		callJSON(t, cs, "list_tables", map[string]any{"database": "iot"}, &tables)
		if len(tables.Tables) != 1 || tables.Tables[0].Name != "readings" {
			t.Errorf("list_tables: got %+v, want readings only", tables)
		}
		for _, call := range []struct {
			tool string
			args map[string]any
			name string
		}{
			{"list_tables", map[string]any{"database": "iot2"}, `"iot2"`},
			{"describe_table", map[string]any{"database": "iot", "table": "devices"}, `"devices"`},
			{"query", map[string]any{"database": "iot", "table": "devices"}, `"devices"`},
			{"query", map[string]any{"database": "iot", "table": "readings", "joins": []any{map[string]any{"table": "devices"}}}, `"devices"`},
			{"run_sql", map[string]any{"database": "iot", "sql": "SELECT name FROM devices"}, "devices"},
			{"explain", map[string]any{"database": "iot", "sql": "SELECT name FROM devices"}, "devices"},
		} {
			kind, msg := toolError(t, callJSON(t, cs, call.tool, call.args, nil))
			if kind != "forbidden" || !strings.Contains(msg, call.name) || !strings.Contains(msg, "role analyst") {
				t.Errorf("%s %v: got %s %q, want forbidden naming %s and the role", call.tool, call.args, kind, msg, call.name)
			}
		}
		var res result
		if r := callJSON(t, cs, "run_sql", map[string]any{"database": "iot", "sql": "SELECT id FROM readings ORDER BY id LIMIT 2"}, &res); r.IsError || res.RowCount != 2 {
			t.Errorf("run_sql on readings: got %+v, want 2 rows", res)
		}
		var uris []string
		for r, err := range cs.Resources(t.Context(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			uris = append(uris, r.URI)
		}
		got := strings.Join(uris, " ")
		if !strings.Contains(got, "/iot/tables/readings/schema") || strings.Contains(got, "devices") || strings.Contains(got, "iot2") {
			t.Errorf("resources/list: got %s, want the schema of iot's readings only", got)
		}
		if _, err := cs.ReadResource(t.Context(), &mcpsdk.ReadResourceParams{URI: "lakegate://databases/iot/tables/devices/schema"}); err == nil {
			t.Error("reading the devices schema: got it, want an error")
		}
	})
}

// pgRole makes a NOLOGIN role that the servers' login may switch to,
// holding SELECT on tables of the test database only.
func pgRole(t *testing.T, role string, tables ...string) {
	t.Helper()
	if err := pgtest.Role(t.Context(), dbURL, role, tables...); err != nil {
		t.Fatal(err)
	}
}

// TestSetLocalRole: queries of role pgread run as the PostgreSQL role
// lg_it_reader, so PostgreSQL refuses the table it has no grant on.
func TestSetLocalRole(t *testing.T) {
	pgRole(t, "lg_it_reader", "readings")
	e := start(t, envOptions{config: func(c *config.Config) {
		c.Access = map[string]config.RoleAccess{
			"pgread": {PGRole: "lg_it_reader"},
		}
	}})
	tok := roleToken(t, "pat", "reader", "pgread")

	t.Run("runs as the role", func(t *testing.T) {
		code, body := post(t, e.base+"/rest/sql", tok, `{"database":"iot","sql":"SELECT current_user AS u, session_user AS s"}`)
		if code != 200 || !strings.Contains(body, `"lg_it_reader"`) {
			t.Errorf("got %d %s, want current_user lg_it_reader", code, body)
		}
		code, body = post(t, e.base+"/rest/sql", token("root", "reader"), `{"database":"iot","sql":"SELECT current_user AS u"}`)
		if code != 200 || !strings.Contains(body, `"`+pgtest.QueryRole+`"`) {
			t.Errorf("without a rule: got %d %s, want query_role %s", code, body, pgtest.QueryRole)
		}
	})
	t.Run("granted table", func(t *testing.T) {
		code, body := post(t, e.base+"/rest/sql", tok, `{"database":"iot","sql":"SELECT count(*) AS n FROM readings"}`)
		if code != 200 || !strings.Contains(body, "5000") {
			t.Errorf("got %d %s, want the count", code, body)
		}
	})
	t.Run("PostgreSQL refuses the table without grant", func(t *testing.T) {
		for name, req := range map[string]string{
			"sql":        `{"database":"iot","sql":"SELECT * FROM devices"}`,
			"stream":     `{"database":"iot","sql":"SELECT * FROM devices","format":"csv"}`,
			"postgresql": `{"database":"iot","sql":"SELECT d.id::text FROM devices d"}`,
		} {
			code, body := post(t, e.base+"/rest/sql", tok, req)
			kind, msg := authError(t, body)
			if code != 403 || kind != "forbidden" || !strings.Contains(msg, "permission denied") || !strings.Contains(msg, "devices") {
				t.Errorf("%s: got %d %s %q, want PostgreSQL's permission denied for devices", name, code, kind, msg)
			}
		}
		cs := e.connect(t, tok)
		kind, msg := toolError(t, callJSON(t, cs, "query", map[string]any{"database": "iot", "table": "devices"}, nil))
		if kind != "forbidden" || !strings.Contains(msg, "permission denied") {
			t.Errorf("query tool: got %s %q, want permission denied", kind, msg)
		}
	})
	t.Run("the catalog is read as the connecting user", func(t *testing.T) {
		code, body := get(t, e.base+"/rest/databases/iot/tables", tok)
		if code != 200 || !strings.Contains(body, `"devices"`) {
			t.Errorf("got %d %s, want devices listed (no table list in the rule)", code, body)
		}
	})
}

// tlsDo sends one request through client.
func tlsDo(t *testing.T, client *http.Client, method, url, tok, session, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if strings.HasSuffix(url, "/mcp") {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestMTLSSubject: a verified client certificate without a bearer token
// identifies the caller by its common name, with tls_client_cert_roles; a
// bearer token, when sent, wins.
func TestMTLSSubject(t *testing.T) {
	pgRole(t, "lg_it_devices", "devices")
	ca := testcert.New(t, "lakegate test CA")
	e := start(t, envOptions{tls: true, config: func(c *config.Config) {
		c.TLSClientCAFile = ca.File
		c.TLSClientCertAuth = true
		c.TLSClientCertRoles = []string{"reader", "devices-only"}
		c.Access = map[string]config.RoleAccess{"devices-only": {Tables: map[string][]string{"iot": {"devices"}}, PGRole: "lg_it_devices"}}
	}})
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.clientTLS.RootCAs,
		Certificates: []tls.Certificate{ca.Client(t, "device-7")}}}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)

	t.Run("certificate roles apply", func(t *testing.T) {
		code, body, _ := tlsDo(t, client, "GET", e.base+"/rest/databases/iot/tables", "", "", "")
		if code != 200 || !strings.Contains(body, `"devices"`) || strings.Contains(body, `"readings"`) {
			t.Errorf("got %d %s, want devices only", code, body)
		}
		code, body, _ = tlsDo(t, client, "GET", e.base+"/admin/mcp/status", "", "", "")
		if code != 403 {
			t.Errorf("admin route: got %d %s, want 403 (the certificate holds reader)", code, body)
		}
	})
	t.Run("subject is the common name", func(t *testing.T) {
		// An MCP session belongs to the subject that opened it.
		code, body, h := tlsDo(t, client, "POST", e.base+"/mcp", "", "", initialize("2025-11-25"))
		sid := h.Get("Mcp-Session-Id")
		if code != 200 || sid == "" {
			t.Fatalf("initialize: got %d %s, want a session", code, body)
		}
		ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
		for _, tc := range []struct {
			name, tok string
			want      int
		}{
			{"same certificate", "", 200},
			{"token for the same subject", token("device-7", "reader"), 200},
			{"token for another subject", token("device-8", "reader"), 403},
		} {
			if code, body, _ := tlsDo(t, client, "POST", e.base+"/mcp", tc.tok, sid, ping); code != tc.want {
				t.Errorf("%s: got %d %s, want %d", tc.name, code, body, tc.want)
			}
		}
	})
	t.Run("bearer token wins", func(t *testing.T) {
		code, body, _ := tlsDo(t, client, "GET", e.base+"/admin/mcp/status", token("root", "admin"), "", "")
		if code != 200 {
			t.Errorf("got %d %s, want 200 with the admin token", code, body)
		}
		code, body, _ = tlsDo(t, client, "GET", e.base+"/rest/databases/iot/tables", token("root", "reader"), "", "")
		if code != 200 || !strings.Contains(body, `"readings"`) {
			t.Errorf("got %d %s, want every table with the token's roles", code, body)
		}
		code, body, _ = tlsDo(t, client, "GET", e.base+"/rest/databases", "not.a.jwt", "", "")
		wantRefused(t, code, body, "invalid bearer token")
	})
}

// Under a table allow-list, unqualified names resolve in public, as the
// allow-list reads them: a schema earlier in search_path ("$user") cannot
// stand in for an allowed table.
func TestAccessPinsSearchPath(t *testing.T) {
	const user = "lg_it_pinned"
	pgRole(t, user, "readings")
	e := start(t, envOptions{config: func(c *config.Config) {
		c.Access = map[string]config.RoleAccess{
			"analyst": {Databases: []string{"iot"}, Tables: map[string][]string{"iot": {"readings"}}, PGRole: user},
		}
	}})
	ctx := t.Context()
	// A schema named as the role the queries run as comes first in the
	// default search_path ("$user"), and the role may read its table.
	schema := pgx.Identifier{user}.Sanitize()
	for _, stmt := range []string{"CREATE SCHEMA " + schema, "CREATE TABLE " + schema + ".readings (id int)", "INSERT INTO " + schema + ".readings VALUES (1)",
		"GRANT USAGE ON SCHEMA " + schema + " TO " + user, "GRANT SELECT ON " + schema + ".readings TO " + user} {
		if _, err := e.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = e.pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	code, body := post(t, e.base+"/rest/sql", roleToken(t, "ann", "reader", "analyst"), `{"database":"iot","sql":"SELECT count(*) AS n FROM readings"}`)
	if code != http.StatusOK || !strings.Contains(body, `"rows":[[5000]]`) {
		t.Errorf("got %d %s, want public.readings' 5000 rows", code, body)
	}
}
