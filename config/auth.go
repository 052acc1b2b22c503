package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// DefaultRolesClaim is the JWT claim read for the caller's roles.
const DefaultRolesClaim = "roles"

// Values of server_info_functions: who may call the SQL functions that read
// server information rather than data (version(), current_setting(...),
// inet_server_addr(), pg_postmaster_start_time(), sqlite_version(), SQLite
// pragma tables, ...). Empty means ServerInfoAdmin.
const (
	// ServerInfoAdmin opens them to callers holding the admin role only
	// (the default).
	ServerInfoAdmin = "admin"
	// ServerInfoAll opens them to every caller allowed to run SQL.
	ServerInfoAll = "all"
	// ServerInfoNone closes them to every caller.
	ServerInfoNone = "none"
)

// RoleAccess narrows what the callers holding one role may use. A caller
// whose roles have no RoleAccess may use everything its route roles allow.
type RoleAccess struct {
	// Databases the role may use; empty means every database.
	Databases []string `json:"databases,omitempty"`
	// Tables maps a database to the tables and views the role may read
	// there, named as the catalog lists them ("readings", or
	// "schema.table" outside PostgreSQL's public schema). A database not
	// in the map: every table.
	Tables map[string][]string `json:"tables,omitempty"`
	// PGRole is the PostgreSQL role the role's queries run as
	// (SET LOCAL ROLE in each transaction), so that PostgreSQL enforces its
	// grants too. The connecting user must be a member of it. Empty: none.
	PGRole string `json:"pg_role,omitempty"`
}

// validateAuth checks the JWT, client certificate and access settings, and
// server_info_functions.
func (c *Config) validateAuth(bad func(format string, args ...any)) {
	for i, f := range c.JWTPublicKeyFiles {
		if strings.TrimSpace(f) == "" {
			bad("jwt_public_key_files[%d] is empty: want the path of a PEM public key (RSA, Ed25519 or ECDSA P-256)", i)
		}
	}
	if c.JWTJWKSURL != "" {
		if err := checkJWKSURL(c.JWTJWKSURL); err != nil {
			bad("jwt_jwks_url %q: %v", redactURL(c.JWTJWKSURL), err)
		}
	}
	c.validateOAuth(bad)
	if strings.TrimSpace(c.JWTRolesClaim) == "" {
		bad("jwt_roles_claim is empty: want a claim name such as %q (a dotted path like realm_access.roles reads a nested claim)", DefaultRolesClaim)
	}
	if c.TLSClientCertAuth {
		if c.TLSClientCAFile == "" {
			bad("tls_client_cert_auth needs tls_client_ca_file: only certificates signed by those CAs identify a caller")
		}
		if len(c.TLSClientCertRoles) == 0 {
			bad("tls_client_cert_auth needs tls_client_cert_roles: the roles of callers identified by a client certificate, e.g. [reader]")
		}
	}
	for i, r := range c.TLSClientCertRoles {
		if !validRole(r) {
			bad("tls_client_cert_roles[%d] %q: want a role name without spaces or commas, e.g. reader", i, r)
		}
	}
	switch c.ServerInfoFunctions {
	case "", ServerInfoAdmin, ServerInfoAll, ServerInfoNone:
	default:
		bad("server_info_functions %q: want %s (only the admin role may call server-information functions such as version() and current_setting()), %s or %s",
			c.ServerInfoFunctions, ServerInfoAdmin, ServerInfoAll, ServerInfoNone)
	}
	if c.QueryRole != "" && !ValidPGRole(c.QueryRole) {
		bad("query_role %q: want a PostgreSQL role name of letters, digits, _ or $ (starting with a letter or _, at most 63 bytes; not none, public or pg_*)", c.QueryRole)
	}
	roles := make([]string, 0, len(c.Access))
	for r := range c.Access {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		c.validateAccess(r, c.Access[r], bad)
	}
}

// validateAccess checks the access rule of one role.
func (c *Config) validateAccess(role string, a RoleAccess, bad func(format string, args ...any)) {
	where := "access." + role
	if !validRole(role) {
		bad("access: role %q: want a role name without spaces or commas, e.g. analyst", role)
		where = fmt.Sprintf("access[%q]", role)
	}
	// With no databases configured the embedded demo is served, and the
	// names cannot be checked here.
	known := make([]string, 0, len(c.Databases))
	for _, db := range c.Databases {
		known = append(known, db.Name)
	}
	isKnown := func(db string) bool { return len(known) == 0 || slices.Contains(known, db) }
	for i, db := range a.Databases {
		if !isKnown(db) {
			bad("%s.databases[%d] %q: no such database (configured: %s)", where, i, db, strings.Join(known, ", "))
		}
	}
	dbs := make([]string, 0, len(a.Tables))
	for db := range a.Tables {
		dbs = append(dbs, db)
	}
	sort.Strings(dbs)
	for _, db := range dbs {
		switch {
		case !isKnown(db):
			bad("%s.tables: database %q: no such database (configured: %s)", where, db, strings.Join(known, ", "))
		case len(a.Databases) > 0 && !slices.Contains(a.Databases, db):
			bad("%s.tables: database %q is not in %s.databases (%s)", where, db, where, strings.Join(a.Databases, ", "))
		case len(a.Tables[db]) == 0:
			bad("%s.tables.%s is empty: list the tables the role may read, or leave the database out for all of them", where, db)
		}
		for i, t := range a.Tables[db] {
			if strings.TrimSpace(t) == "" {
				bad("%s.tables.%s[%d] is empty: want a table name as the catalog lists it, e.g. readings or schema.table", where, db, i)
			}
		}
	}
	if a.PGRole != "" && !ValidPGRole(a.PGRole) {
		bad("%s.pg_role %q: want a PostgreSQL role name of letters, digits, _ or $ (starting with a letter or _, at most 63 bytes; not none, public or pg_*)", where, a.PGRole)
	}
}

// ValidPGRole reports whether name may be used as an access rule's
// PostgreSQL role: a plain identifier, and not one of the names SET ROLE
// reads specially (none resets to the connecting user) or reserves.
func ValidPGRole(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	lower := strings.ToLower(name)
	if lower == "none" || lower == "public" || strings.HasPrefix(lower, "pg_") {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
		case i > 0 && (r >= '0' && r <= '9' || r == '$'):
		default:
			return false
		}
	}
	return true
}

// validRole accepts the role names a token or rule may carry.
func validRole(r string) bool {
	return r != "" && len(r) <= 128 && !strings.ContainsAny(r, " \t\r\n,")
}

// checkJWKSURL accepts https URLs, and http ones on a loopback host only
// (keys fetched over plain HTTP could be swapped on the way).
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("want an https:// URL of a JWK Set")
	}
	return checkSecureURL(u, "an https:// URL of a JWK Set")
}

// checkSecureURL accepts https URLs, and http ones on a loopback host;
// what names the URL wanted.
func checkSecureURL(u *url.URL, what string) error {
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if IsLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("want https:// (http:// only on a loopback host such as 127.0.0.1)")
	}
	return fmt.Errorf("want %s", what)
}

// IsLoopbackHost reports whether host (no port) is localhost or a loopback
// IP address: the only hosts plain http:// is accepted for in key and
// OAuth URLs.
func IsLoopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// CheckIssuerURL checks an OAuth authorization server's issuer identifier
// (RFC 8414 section 2): https (http on a loopback host), a host, no
// query, fragment or user info.
func CheckIssuerURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("want the issuer URL of an OAuth authorization server, e.g. https://auth.example.com")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil || strings.HasSuffix(raw, "#") || strings.HasSuffix(raw, "?") {
		return fmt.Errorf("an issuer URL has no query, fragment or user info")
	}
	return checkSecureURL(u, "an https:// issuer URL")
}

// validateOAuth checks authorization_servers and public_url.
func (c *Config) validateOAuth(bad func(format string, args ...any)) {
	for i, s := range c.AuthorizationServers {
		if err := CheckIssuerURL(s); err != nil {
			bad("authorization_servers[%d] %q: %v", i, s, err)
		}
	}
	if len(c.AuthorizationServers) > 0 && c.PublicURL == "" {
		bad("authorization_servers needs public_url: the URL clients reach this server at (e.g. https://lakegate.example.com), " +
			"which the authorization servers' tokens must name in aud")
	}
	if c.PublicURL == "" {
		return
	}
	u, err := url.Parse(c.PublicURL)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		bad("public_url %q: want scheme://host[:port], e.g. https://lakegate.example.com", c.PublicURL)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		// The well-known metadata sits at the host's root (RFC 9728
		// inserts its path before the resource's), which a path prefix
		// would move out of this server's reach.
		bad("public_url %q: want scheme://host[:port] with no path, query or fragment, e.g. https://lakegate.example.com", c.PublicURL)
	default:
		if err := checkSecureURL(u, "scheme://host[:port], e.g. https://lakegate.example.com"); err != nil {
			bad("public_url %q: %v", c.PublicURL, err)
		}
	}
}

// HasJWTKeys reports whether any JWT key is configured: the HS256 secret,
// public key files, a JWKS URL, or authorization servers (whose JWK Sets
// their metadata names).
func (c *Config) HasJWTKeys() bool {
	return c.JWTSecret != "" || len(c.JWTPublicKeyFiles) > 0 || c.JWTJWKSURL != "" || len(c.AuthorizationServers) > 0
}
