package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

// leeway is the clock skew allowed on exp, nbf and iat.
const leeway = 30 * time.Second

// Claims are the JWT claims NewToken writes: the standard ones plus the
// caller's role.
type Claims struct {
	Role  string   `json:"role,omitempty"`
	Roles []string `json:"roles,omitempty"`
	jwt.RegisteredClaims
}

// NewToken signs an HS256 token for subject with role, valid for ttl.
func NewToken(secret []byte, subject, role string, ttl time.Duration) (string, error) {
	if len(secret) < config.MinSecretBytes {
		return "", fmt.Errorf("jwt secret is %d bytes: it must be at least %d", len(secret), config.MinSecretBytes)
	}
	if subject == "" {
		return "", errors.New("subject is required")
	}
	if !slices.Contains(lakegate.Roles, role) {
		return "", fmt.Errorf("role %q: want one of %s", role, strings.Join(lakegate.Roles, ", "))
	}
	if ttl <= 0 {
		return "", errors.New("ttl must be positive")
	}
	now := time.Now()
	claims := Claims{Role: role, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   subject,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// verifier checks bearer tokens against the configured keys (each pinned
// to its algorithm), with exp required, iss and aud when configured, and a
// small leeway; and reads the caller's roles from the roles claim. A token
// whose iss is one of the authorization servers goes to that server's
// verifier instead.
type verifier struct {
	keys       *keySet
	parser     *jwt.Parser
	issuer     string
	audiences  []string
	rolesClaim string
	// resource is this server as an OAuth protected resource; nil without
	// authorization servers.
	resource *oauthResource
	// byIssuer verifies the tokens of each authorization server.
	byIssuer map[string]*verifier
}

// newVerifier loads the keys of cfg; close ends what it started.
func newVerifier(cfg config.Config, log *slog.Logger) (*verifier, error) {
	keys, err := loadKeys(cfg, log)
	if err != nil {
		return nil, err
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(keys.algs),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(), // an iat in the future (past leeway) is refused
		jwt.WithLeeway(leeway),
	}
	if cfg.JWTIssuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.JWTIssuer))
	}
	if cfg.JWTAudience != "" {
		opts = append(opts, jwt.WithAudience(cfg.JWTAudience))
	}
	rolesClaim := cfg.JWTRolesClaim
	if rolesClaim == "" {
		rolesClaim = config.DefaultRolesClaim
	}
	v := &verifier{keys: keys, parser: jwt.NewParser(opts...), issuer: cfg.JWTIssuer, rolesClaim: rolesClaim}
	if cfg.JWTAudience != "" {
		v.audiences = []string{cfg.JWTAudience}
	}
	if v.resource = newOAuthResource(cfg); v.resource != nil {
		v.byIssuer = newIssuerVerifiers(v.resource, rolesClaim, log)
	}
	return v, nil
}

// close ends the authorization servers' discovery and refreshes, then the
// configured JWK Set's: the reverse of newVerifier. It waits for the
// discovery goroutines.
func (v *verifier) close() {
	for _, iv := range v.byIssuer {
		iv.close()
	}
	v.keys.close()
}

// verify checks token and returns its caller. ctx bounds a JWK Set fetch.
func (v *verifier) verify(ctx context.Context, token string) (lakegate.Caller, error) {
	if v.byIssuer != nil {
		if iv := v.byIssuer[tokenIssuer(token)]; iv != nil {
			return iv.verify(ctx, token)
		}
	}
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(token, &claims, v.keys.keyfunc(ctx))
	if errors.Is(err, errIssuerKeys) {
		return lakegate.Caller{}, &lakegate.Error{Kind: lakegate.KindUnavailable,
			Message: fmt.Sprintf("the keys of authorization server %q could not be fetched, so the token cannot be checked now", v.issuer),
			Hint:    "try again shortly", RetryAfter: discoveryRetry, Err: err}
	}
	if err != nil {
		return lakegate.Caller{}, &lakegate.Error{Kind: lakegate.KindAuth, Message: v.reason(err, claims), Err: err}
	}
	sub, _ := claims.GetSubject()
	if sub == "" {
		return lakegate.Caller{}, lakegate.Errorf(lakegate.KindAuth, "bearer token has no sub claim")
	}
	roles, err := v.roles(claims)
	if err != nil {
		return lakegate.Caller{}, err
	}
	return lakegate.Caller{Subject: sub, Roles: roles}, nil
}

// reason says why a token was refused, naming what is accepted; never
// the token or a key.
func (v *verifier) reason(err error, claims jwt.MapClaims) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "invalid bearer token: not a JWT"
	case errors.Is(err, errUnknownKID):
		return "bearer token signature is not valid for this server: the key set has no key with its kid for its algorithm"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "bearer token signature is not valid for this server (accepted algorithms: " + strings.Join(v.keys.algs, ", ") + ")"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "bearer token has expired"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return fmt.Sprintf("bearer token issuer is not accepted (want iss %q)", v.issuer)
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return fmt.Sprintf("bearer token audience is not accepted (want aud %q)", strings.Join(v.audiences, `" or "`))
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		var missing []string
		for _, c := range []struct {
			name string
			want bool
		}{{"exp", true}, {"iss", v.issuer != ""}, {"aud", len(v.audiences) > 0}} {
			if _, ok := claims[c.name]; !ok && c.want {
				missing = append(missing, c.name)
			}
		}
		if len(missing) == 0 {
			return "bearer token lacks a required claim"
		}
		return "bearer token has no " + strings.Join(missing, ", ") + " claim"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return fmt.Sprintf("bearer token is issued in the future (iat later than now, past %s of leeway): check the issuer's clock", leeway)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "bearer token is not valid yet (nbf in the future)"
	}
	return "invalid bearer token"
}

// roles reads the roles claim: a string or a list of strings, found by
// its name, else as a dotted path into nested claims. With the default
// claim, today's single "role" claim is read too.
func (v *verifier) roles(claims jwt.MapClaims) ([]string, error) {
	var roles []string
	val, ok := lookupClaim(claims, v.rolesClaim)
	if ok {
		switch x := val.(type) {
		case string:
			roles = append(roles, x)
		case []any:
			for _, r := range x {
				s, isStr := r.(string)
				if !isStr {
					return nil, lakegate.Errorf(lakegate.KindAuth, "bearer token claim %q: want a string or a list of strings", v.rolesClaim)
				}
				roles = append(roles, s)
			}
		default:
			return nil, lakegate.Errorf(lakegate.KindAuth, "bearer token claim %q: want a string or a list of strings", v.rolesClaim)
		}
	}
	if v.rolesClaim == config.DefaultRolesClaim {
		if r, ok := claims["role"].(string); ok && r != "" {
			roles = append(roles, r)
		}
	}
	return roles, nil
}

// lookupClaim finds claim name in claims, or follows it as a dotted path
// ("realm_access.roles").
func lookupClaim(claims map[string]any, name string) (any, bool) {
	if v, ok := claims[name]; ok {
		return v, true
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// authenticator finds who calls: from a bearer token (verifier), a
// verified client certificate (with tls_client_cert_auth) or, in a
// cluster, another replica's signature. Safe for concurrent use.
type authenticator struct {
	verifier  *verifier
	replicas  Replicas // nil: a single server
	certAuth  bool
	certRoles []string
	hint      string // how this server accepts callers
	runSecret bool   // jwt_secret was made for this run
}

// runSecretHint explains a refused signature on a server whose secret was
// made for its run.
const runSecretHint = "this server signs tokens with a secret made for this run (no jwt_secret is set), so a token from an earlier run " +
	"is refused: use a token it printed at this start, or set jwt_secret (LAKEGATE_JWT_SECRET) so that tokens outlive restarts"

func newAuthenticator(cfg config.Config, v *verifier, replicas Replicas, runSecret bool) *authenticator {
	ways := []string{"send Authorization: Bearer <JWT>"}
	if cfg.JWTSecret != "" {
		ways[0] += "; `lakegate token` makes one"
	}
	if cfg.TLSClientCertAuth {
		ways = append(ways, "or connect with a client certificate")
	}
	return &authenticator{verifier: v, replicas: replicas, certAuth: cfg.TLSClientCertAuth,
		certRoles: slices.Clone(cfg.TLSClientCertRoles), hint: strings.Join(ways, ", "), runSecret: runSecret}
}

// authenticate puts the caller on the request context: from the bearer
// token when there is one, else (with tls_client_cert_auth) from the
// verified client certificate's common name. In a cluster, a request
// signed by another replica (Replicas.Caller) goes to replicaCaller,
// which accepts it on a block read only.
func (a *authenticator) authenticate(c *gin.Context) {
	h := c.GetHeader("Authorization")
	var caller lakegate.Caller
	var err error
	signed := false
	if a.replicas != nil {
		caller, signed, err = a.replicas.Caller(c.Request)
	}
	switch {
	case signed:
		caller, err = a.replicaCaller(c, h, caller, err)
	case h == "" && a.certAuth && c.Request.TLS != nil && len(c.Request.TLS.VerifiedChains) > 0:
		caller, err = a.certCaller(c)
	default:
		caller, err = a.bearerCaller(c, h)
	}
	if err != nil {
		dropBody(c)
		fail(c, err)
		return
	}
	c.Request = c.Request.WithContext(lakegate.WithCaller(c.Request.Context(), caller))
	c.Set(subjectKey, caller.Subject)
}

// replicaRoutes are the routes a replica's signature is accepted on, GET
// only: a transfer's manifest and its blocks, the block transport routes
// the MCP plugin mounts (mcp.BlocksPath) and cluster.Peers.Send reads
// when a tool call on one replica reads a block another one holds; and a
// job (mcp.JobsPath), which job_status reads and cancel_job cancels
// (DELETE) on the replica that runs it.
var replicaRoutes = []string{"/mcp/blocks/:id", "/mcp/blocks/:id/:n", "/mcp/jobs/:id"}

// replicaJobRoute is the one route a replica's signature may DELETE.
const replicaJobRoute = "/mcp/jobs/:id"

// replicaCaller is the caller another replica signed into a request
// (signed, or sigErr when the signature is bad). A signature is a
// credential of one use: a block read on a caller's behalf. So it is
// refused anywhere else (admin, console, ingest, REST, MCP), refused
// beside another credential (a bearer token or a client certificate),
// and gives no role but reader, whatever the signer wrote: whoever holds
// the cluster's key can read blocks as a caller, never administer.
func (a *authenticator) replicaCaller(c *gin.Context, authz string, signed lakegate.Caller, sigErr error) (lakegate.Caller, error) {
	switch {
	case !slices.Contains(replicaRoutes, c.FullPath()) ||
		(c.Request.Method != http.MethodGet && (c.Request.Method != http.MethodDelete || c.FullPath() != replicaJobRoute)):
		return lakegate.Caller{}, &lakegate.Error{Kind: lakegate.KindAuth,
			Message: "a replica's signature is accepted on block reads and job status only", Hint: a.hint}
	case authz != "" || (c.Request.TLS != nil && len(c.Request.TLS.PeerCertificates) > 0):
		return lakegate.Caller{}, &lakegate.Error{Kind: lakegate.KindAuth,
			Message: "a request carries one credential: a bearer token, a client certificate or a replica's signature, not several", Hint: a.hint}
	case sigErr != nil:
		return lakegate.Caller{}, sigErr
	}
	roles := []string{}
	if slices.Contains(signed.Roles, lakegate.RoleReader) {
		roles = append(roles, lakegate.RoleReader)
	}
	return lakegate.Caller{Subject: signed.Subject, Roles: roles}, nil
}

func (a *authenticator) bearerCaller(c *gin.Context, h string) (lakegate.Caller, error) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return lakegate.Caller{}, &lakegate.Error{Kind: lakegate.KindAuth, Message: "missing bearer token", Hint: a.hint}
	}
	caller, err := a.verifier.verify(c.Request.Context(), strings.TrimSpace(token))
	if e, ok := errors.AsType[*lakegate.Error](err); ok && a.runSecret && e.Hint == "" &&
		(errors.Is(err, jwt.ErrTokenSignatureInvalid) || errors.Is(err, jwt.ErrTokenUnverifiable)) {
		e.Hint = runSecretHint
	}
	return caller, err
}

// certCaller is the caller of a verified client certificate: its common
// name, with the configured roles.
func (a *authenticator) certCaller(c *gin.Context) (lakegate.Caller, error) {
	cn := c.Request.TLS.VerifiedChains[0][0].Subject.CommonName
	if strings.TrimSpace(cn) == "" {
		return lakegate.Caller{}, &lakegate.Error{Kind: lakegate.KindAuth, Message: "the client certificate has no common name (CN) to use as the subject",
			Hint: "use a certificate whose subject has a CN, or send Authorization: Bearer <JWT>"}
	}
	return lakegate.Caller{Subject: cn, Roles: slices.Clone(a.certRoles)}, nil
}

// requireRole lets only callers holding role through (admin holds all).
func requireRole(role string) gin.HandlerFunc {
	return func(c *gin.Context) {
		caller, _ := lakegate.CallerFrom(c.Request.Context())
		if !caller.HasRole(role) {
			fail(c, lakegate.Errorf(lakegate.KindForbidden, "this needs the %s role; the token has %v", role, caller.Roles))
		}
	}
}
