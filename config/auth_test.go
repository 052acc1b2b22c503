package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadAuthEnv(t *testing.T) {
	env := map[string]string{
		"LAKEGATE_JWT_PUBLIC_KEY_FILES":  "/k/rsa.pem, /k/ed.pem",
		"LAKEGATE_JWT_JWKS_URL":          "https://idp.example.com/jwks.json",
		"LAKEGATE_JWT_ISSUER":            "https://idp.example.com/",
		"LAKEGATE_JWT_AUDIENCE":          "lakegate",
		"LAKEGATE_JWT_ROLES_CLAIM":       "realm_access.roles",
		"LAKEGATE_TLS_CERT_FILE":         "/c.pem",
		"LAKEGATE_TLS_KEY_FILE":          "/k.pem",
		"LAKEGATE_TLS_CLIENT_CA_FILE":    "/ca.pem",
		"LAKEGATE_TLS_CLIENT_CERT_AUTH":  "true",
		"LAKEGATE_TLS_CLIENT_CERT_ROLES": "reader,analyst",
		"LAKEGATE_ACCESS":                `{"analyst": {"databases": ["iot"], "tables": {"iot": ["readings"]}, "pg_role": "lg_analyst"}}`,
		"LAKEGATE_DATABASE_URL":          "postgres://h/iot",
		"LAKEGATE_SERVER_INFO_FUNCTIONS": "none",
	}
	got, err := Load("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.JWTPublicKeyFiles = []string{"/k/rsa.pem", "/k/ed.pem"}
	want.JWTJWKSURL = "https://idp.example.com/jwks.json"
	want.JWTIssuer = "https://idp.example.com/"
	want.JWTAudience = "lakegate"
	want.JWTRolesClaim = "realm_access.roles"
	want.TLSCertFile, want.TLSKeyFile, want.TLSClientCAFile = "/c.pem", "/k.pem", "/ca.pem"
	want.TLSClientCertAuth = true
	want.TLSClientCertRoles = []string{"reader", "analyst"}
	want.Access = map[string]RoleAccess{"analyst": {Databases: []string{"iot"},
		Tables: map[string][]string{"iot": {"readings"}}, PGRole: "lg_analyst"}}
	want.Databases = []Database{{Name: "iot", URL: "postgres://h/iot"}}
	want.ServerInfoFunctions = ServerInfoNone
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if !got.HasJWTKeys() {
		t.Error("got HasJWTKeys false, want true")
	}
}

func TestLoadAuthEnvErrors(t *testing.T) {
	for name, tt := range map[string]struct {
		env  map[string]string
		want []string
	}{
		"bad bool":    {map[string]string{"LAKEGATE_TLS_CLIENT_CERT_AUTH": "yes please"}, []string{"LAKEGATE_TLS_CLIENT_CERT_AUTH", "true or false"}},
		"bad access":  {map[string]string{"LAKEGATE_ACCESS": `["analyst"]`}, []string{"LAKEGATE_ACCESS", "JSON object"}},
		"wrong type":  {map[string]string{"LAKEGATE_ACCESS": `{"a": {"pg_role": 1}}`}, []string{"LAKEGATE_ACCESS"}},
		"typo access": {map[string]string{"LAKEGATE_ACCESS": `{"a": {"table": {"iot": ["t"]}}}`}, []string{"LAKEGATE_ACCESS", `"table"`}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load("", func(k string) string { return tt.env[k] })
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

func TestValidateAuth(t *testing.T) {
	iot := []Database{{Name: "iot", URL: "postgres://h/iot"}, {Name: "lab", URL: "sqlite:lab.db"}}
	tests := []struct {
		name   string
		change func(*Config)
		want   []string
	}{
		{"jwks over http", func(c *Config) { c.JWTJWKSURL = "http://idp.example.com/jwks" }, []string{"jwt_jwks_url", "https://", "loopback"}},
		{"jwks not a URL", func(c *Config) { c.JWTJWKSURL = "idp/jwks" }, []string{"jwt_jwks_url", "https://"}},
		{"jwks ftp", func(c *Config) { c.JWTJWKSURL = "ftp://idp/jwks" }, []string{"jwt_jwks_url", "https://"}},
		{"empty key file", func(c *Config) { c.JWTPublicKeyFiles = []string{"a.pem", " "} }, []string{"jwt_public_key_files[1]", "PEM"}},
		{"empty roles claim", func(c *Config) { c.JWTRolesClaim = "" }, []string{"jwt_roles_claim", "roles"}},
		{"cert auth without CA", func(c *Config) { c.TLSClientCertAuth, c.TLSClientCertRoles = true, []string{"reader"} },
			[]string{"tls_client_cert_auth needs tls_client_ca_file"}},
		{"cert auth without roles", func(c *Config) {
			c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile, c.TLSClientCertAuth = "c", "k", "ca", true
		}, []string{"tls_client_cert_roles", "reader"}},
		{"bad cert role", func(c *Config) { c.TLSClientCertRoles = []string{"a b"} }, []string{"tls_client_cert_roles[0]"}},
		{"unknown database", func(c *Config) {
			c.Databases = iot
			c.Access = map[string]RoleAccess{"analyst": {Databases: []string{"nope"}}}
		}, []string{`access.analyst.databases[0] "nope"`, "configured: iot, lab"}},
		{"tables of unknown database", func(c *Config) {
			c.Databases = iot
			c.Access = map[string]RoleAccess{"analyst": {Tables: map[string][]string{"nope": {"t"}}}}
		}, []string{`access.analyst.tables: database "nope"`}},
		{"tables outside databases", func(c *Config) {
			c.Databases = iot
			c.Access = map[string]RoleAccess{"analyst": {Databases: []string{"iot"}, Tables: map[string][]string{"lab": {"t"}}}}
		}, []string{`database "lab" is not in access.analyst.databases`}},
		{"empty table list", func(c *Config) {
			c.Access = map[string]RoleAccess{"analyst": {Tables: map[string][]string{"iot": {}}}}
		}, []string{"access.analyst.tables.iot is empty"}},
		{"pg role none", func(c *Config) { c.Access = map[string]RoleAccess{"a": {PGRole: "NONE"}} }, []string{"access.a.pg_role", "not none"}},
		{"pg role injection", func(c *Config) { c.Access = map[string]RoleAccess{"a": {PGRole: `x"; RESET ROLE; --`}} }, []string{"access.a.pg_role"}},
		{"pg role reserved", func(c *Config) { c.Access = map[string]RoleAccess{"a": {PGRole: "pg_read_all_data"}} }, []string{"access.a.pg_role", "pg_*"}},
		{"pg role too long", func(c *Config) { c.Access = map[string]RoleAccess{"a": {PGRole: strings.Repeat("r", 64)}} }, []string{"access.a.pg_role"}},
		{"bad role name", func(c *Config) { c.Access = map[string]RoleAccess{"a b": {}} }, []string{`role "a b"`}},
		{"unknown server_info_functions", func(c *Config) { c.ServerInfoFunctions = "readers" },
			[]string{`server_info_functions "readers"`, "admin", "all", "none"}},
		{"server_info_functions is case-sensitive", func(c *Config) { c.ServerInfoFunctions = "Admin" }, []string{"server_info_functions"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.change(&c)
			err := c.Validate()
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
	t.Run("good", func(t *testing.T) {
		c := Default()
		c.Databases = iot
		c.JWTJWKSURL = "http://127.0.0.1:8080/jwks"
		c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = "c", "k", "ca"
		c.TLSClientCertAuth, c.TLSClientCertRoles = true, []string{"reader"}
		c.Access = map[string]RoleAccess{
			"analyst": {Databases: []string{"iot"}, Tables: map[string][]string{"iot": {"readings", "other.things"}}, PGRole: "lg_analyst$1"},
			"lab":     {Databases: []string{"lab"}},
		}
		if err := c.Validate(); err != nil {
			t.Errorf("got %v, want nil", err)
		}
	})
	for _, v := range []string{"", ServerInfoAdmin, ServerInfoAll, ServerInfoNone} {
		t.Run("server_info_functions "+v, func(t *testing.T) {
			c := Default()
			c.ServerInfoFunctions = v
			if err := c.Validate(); err != nil {
				t.Errorf("got %v, want nil", err)
			}
		})
	}
}

func TestLoadAuthFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lakegate.yaml")
	data := `
jwt_public_key_files: [/k/ed.pem]
jwt_issuer: https://idp.example.com/
jwt_roles_claim: groups
databases:
  - {name: iot, url: "postgres://h/iot"}
access:
  analyst:
    databases: [iot]
    tables: {iot: [readings, devices]}
    pg_role: lg_analyst
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := RoleAccess{Databases: []string{"iot"}, Tables: map[string][]string{"iot": {"readings", "devices"}}, PGRole: "lg_analyst"}
	if !reflect.DeepEqual(got.Access["analyst"], want) || got.JWTRolesClaim != "groups" || len(got.JWTPublicKeyFiles) != 1 {
		t.Errorf("got %+v, want the file's auth settings", got)
	}

	bad := strings.Replace(data, "pg_role:", "pg_rol:", 1)
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "pg_rol") {
		t.Errorf("got %v, want an error naming the unknown setting pg_rol", err)
	}
}
