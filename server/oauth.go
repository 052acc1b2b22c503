package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

// MCP authorization discovery (MCP authorization spec, 2025-11-25): with
// authorization_servers set, this server is an OAuth 2.0 protected
// resource. It publishes RFC 9728 metadata naming the authorization
// servers, points every 401 at it, and accepts the servers' access tokens
// whose aud names it.

// wellKnownResource is the RFC 9728 metadata path; a resource with a path
// has its metadata at this path followed by its own.
const wellKnownResource = "/.well-known/oauth-protected-resource"

// Paths of the resources this server names besides its root: the MCP
// endpoints, which MCP clients take as the resource they connect to.
const (
	resourceMCP    = "/mcp"
	resourceMCPSSE = "/mcp/sse"
)

// discoveryRetry is how long a failed discovery of an authorization
// server's keys is remembered before a token of that server tries again.
const discoveryRetry = 10 * time.Second

// maxMetadataBytes bounds an authorization server's metadata document.
const maxMetadataBytes = 1 << 20

// oauthResource is this server as an OAuth protected resource: its
// identifiers, derived from public_url, and its authorization servers.
type oauthResource struct {
	// base is public_url with a lower-case scheme and host and no
	// trailing slash: the root resource identifier.
	base    string
	servers []string
}

// newOAuthResource returns nil when no authorization server is set.
func newOAuthResource(cfg config.Config) *oauthResource {
	if len(cfg.AuthorizationServers) == 0 {
		return nil
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil { // Validate has refused it already
		return nil
	}
	return &oauthResource{base: strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host), servers: cfg.AuthorizationServers}
}

// audiences are the aud values an authorization server's token may carry:
// every identifier of this server (the root, with or without its slash,
// and the MCP endpoints). They name one server with one set of roles, so
// each is accepted on every route.
func (o *oauthResource) audiences() []string {
	return []string{o.base, o.base + "/", o.base + resourceMCP, o.base + resourceMCPSSE}
}

// resourcePath is the path of the resource a request to path belongs to:
// /mcp for Streamable HTTP, /mcp/sse for the legacy SSE stream and its
// messages, the root ("") for everything else.
func resourcePath(path string) string {
	switch {
	case path == resourceMCP || path == resourceMCP+"/":
		return resourceMCP
	case path == resourceMCPSSE || strings.HasPrefix(path, "/mcp/messages"):
		return resourceMCPSSE
	}
	return ""
}

// challenge is the WWW-Authenticate value of a 401 on path (RFC 9728
// section 5.1): the metadata of the resource the request was for.
func (o *oauthResource) challenge(path string) string {
	return `Bearer realm="lakegate", resource_metadata="` + o.base + wellKnownResource + resourcePath(path) + `"`
}

// resourceMetadata is an RFC 9728 protected resource metadata document.
type resourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
}

// mount serves the metadata of the root and of each MCP endpoint without
// authentication, like /health: it is what a client without a token reads
// to find where to get one.
func (o *oauthResource) mount(r gin.IRouter) {
	for _, p := range []string{"", resourceMCP, resourceMCPSSE} {
		// The resource must be the identifier the well-known path was made
		// from (RFC 9728 section 3.3), or clients must not use it.
		doc := resourceMetadata{
			Resource:               o.base + p,
			AuthorizationServers:   o.servers,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "lakegate",
		}
		r.GET(wellKnownResource+p, func(c *gin.Context) {
			dropBody(c)
			// Public data, read by browser-based clients too.
			c.Header("Access-Control-Allow-Origin", "*")
			c.JSON(http.StatusOK, doc)
		})
	}
}

// mountOAuth serves the protected resource metadata when authorization
// servers are set.
func (s *Server) mountOAuth(r gin.IRouter) {
	if s.auth.verifier.resource != nil {
		s.auth.verifier.resource.mount(r)
	}
}

// challenge is the WWW-Authenticate value of a 401 on path.
func (s *Server) challenge(path string) string {
	if s.auth.verifier.resource != nil {
		return s.auth.verifier.resource.challenge(path)
	}
	return `Bearer realm="lakegate"`
}

// newIssuerVerifiers makes one verifier per authorization server: its
// tokens must carry its iss and one of this server's identifiers in aud,
// and are verified with the keys of its JWK Set only. Discovery starts at
// once; close ends it and the sets' refreshes.
func newIssuerVerifiers(res *oauthResource, rolesClaim string, log *slog.Logger) map[string]*verifier {
	byIssuer := make(map[string]*verifier, len(res.servers))
	algs := []string{algEdDSA, algES256, algRS256}
	for _, iss := range res.servers {
		if byIssuer[iss] != nil {
			continue
		}
		ctx, stop := context.WithCancel(context.Background())
		client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		ik := &issuerKeys{issuer: iss, ctx: ctx, client: client, log: log}
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = ik.get() })
		keys := &keySet{public: map[string][]any{}, jwks: ik, stop: stop, client: client, wait: wg.Wait, algs: algs}
		parser := jwt.NewParser(jwt.WithValidMethods(algs), jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithLeeway(leeway),
			jwt.WithIssuer(iss), jwt.WithAudience(res.audiences()...))
		byIssuer[iss] = &verifier{keys: keys, parser: parser, issuer: iss, audiences: res.audiences(), rolesClaim: rolesClaim}
	}
	return byIssuer
}

// tokenIssuer reads a token's iss claim without verifying anything: it
// only chooses the keys that will verify it.
func tokenIssuer(token string) string {
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(token, claims); err != nil {
		return ""
	}
	iss, _ := claims.GetIssuer()
	return iss
}

// issuerKeys is the JWK Set of one authorization server, found through
// its metadata: RFC 8414 authorization server metadata, else OpenID
// Connect discovery, whose issuer must be the configured one and whose
// jwks_uri names the set. It is looked up at start and, while that fails,
// again by a token of that server at most every discoveryRetry. It is
// safe for concurrent use; its keySet's close ends it.
type issuerKeys struct {
	issuer string
	ctx    context.Context // the keySet's: ends discovery and the set's refresh
	client *http.Client
	log    *slog.Logger

	mu    sync.Mutex
	jwks  keyfunc.Keyfunc // nil until found
	tried time.Time
	err   error
}

// KeyfuncCtx finds the token's keys in the server's JWK Set; with no set
// found, the error wraps errIssuerKeys.
func (ik *issuerKeys) KeyfuncCtx(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		jwks, err := ik.get()
		if err != nil {
			return nil, err
		}
		return jwks.KeyfuncCtx(ctx)(t)
	}
}

// get returns the JWK Set, discovering it when not found yet and the last
// attempt is older than discoveryRetry. Callers wait for a discovery in
// progress (bounded by jwksTimeout per fetch).
func (ik *issuerKeys) get() (keyfunc.Keyfunc, error) {
	ik.mu.Lock()
	defer ik.mu.Unlock()
	if ik.jwks != nil {
		return ik.jwks, nil
	}
	if !ik.tried.IsZero() && time.Since(ik.tried) < discoveryRetry {
		return nil, ik.err
	}
	ik.tried = time.Now()
	jwksURI, err := ik.discover()
	if err == nil {
		ik.jwks, err = newJWKS(ik.ctx, jwksURI, ik.client, ik.log, "authorization server "+ik.issuer)
	}
	if err != nil {
		if ik.ctx.Err() == nil {
			ik.log.Warn("authorization_servers: the keys of an authorization server could not be found", "issuer", ik.issuer, lakegate.LogError, err.Error())
		}
		ik.err = fmt.Errorf("%w: %s: %w", errIssuerKeys, ik.issuer, err)
		return nil, ik.err
	}
	ik.log.Info("authorization_servers: keys found", "issuer", ik.issuer, "jwks_uri", jwksURI)
	return ik.jwks, nil
}

// discover returns the jwks_uri of the first metadata document found, in
// the order MCP clients try them.
func (ik *issuerKeys) discover() (string, error) {
	ctx, cancel := context.WithTimeout(ik.ctx, jwksTimeout)
	defer cancel()
	var errs []error
	for _, u := range metadataURLs(ik.issuer) {
		jwksURI, err := ik.fetchMetadata(ctx, u)
		if err == nil {
			return jwksURI, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return "", errors.Join(errs...)
}

// metadataURLs are the metadata locations of issuer: RFC 8414 section 3.1
// (the well-known path inserted before the issuer's path) and OpenID
// Connect discovery (inserted, then appended), as the MCP authorization
// spec orders them.
func metadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		origin + path + "/.well-known/openid-configuration",
	}
}

// fetchMetadata reads one metadata document and returns its jwks_uri. The
// document must name the configured issuer exactly (RFC 8414 section
// 3.3), or it could be another server's; redirects are not followed.
func (ik *issuerKeys) fetchMetadata(ctx context.Context, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	client := *ik.client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadataBytes))
		return "", fmt.Errorf("%s: %s", u, resp.Status)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadataBytes)).Decode(&doc); err != nil {
		return "", fmt.Errorf("%s: not a metadata document: %w", u, err)
	}
	if doc.Issuer != ik.issuer {
		return "", fmt.Errorf("%s: names issuer %q, want %q", u, doc.Issuer, ik.issuer)
	}
	if doc.JWKSURI == "" {
		return "", fmt.Errorf("%s: has no jwks_uri", u)
	}
	ju, err := url.Parse(doc.JWKSURI)
	if err != nil || ju.Host == "" || !(ju.Scheme == "https" || ju.Scheme == "http" && config.IsLoopbackHost(ju.Hostname())) {
		return "", fmt.Errorf("%s: jwks_uri %q: want https:// (http:// only on a loopback host)", u, doc.JWKSURI)
	}
	return doc.JWKSURI, nil
}
