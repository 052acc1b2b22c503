package server

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"

	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/query"
)

// Roles a token may carry.
const (
	RoleReader = "reader"
	RoleWriter = "writer"
	RoleAdmin  = "admin"
)

// Roles lists the known roles.
var Roles = []string{RoleReader, RoleWriter, RoleAdmin}

// Claims are the JWT claims lakegate reads: the standard ones plus the
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
	if !slices.Contains(Roles, role) {
		return "", fmt.Errorf("role %q: want one of %s", role, strings.Join(Roles, ", "))
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

// verifier checks bearer tokens: HS256 only, exp required, small leeway.
type verifier struct {
	secret []byte
	parser *jwt.Parser
}

func newVerifier(secret []byte) *verifier {
	return &verifier{secret: secret, parser: jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(30*time.Second),
	)}
}

func (v *verifier) verify(token string) (query.Caller, error) {
	var claims Claims
	_, err := v.parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return v.secret, nil })
	if err != nil {
		msg := "invalid bearer token"
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			msg = "bearer token has expired"
		case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
			msg = "bearer token has no exp claim"
		case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
			msg = "bearer token signature is not valid for this server"
		}
		return query.Caller{}, &query.Error{Kind: query.KindAuth, Message: msg, Err: err}
	}
	if claims.Subject == "" {
		return query.Caller{}, query.Errorf(query.KindAuth, "bearer token has no sub claim")
	}
	roles := claims.Roles
	if claims.Role != "" {
		roles = append(roles, claims.Role)
	}
	return query.Caller{Subject: claims.Subject, Roles: roles}, nil
}

// authenticate requires a valid bearer token and puts its caller on the
// request context.
func (s *Server) authenticate(c *gin.Context) {
	h := c.GetHeader("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		fail(c, &query.Error{Kind: query.KindAuth, Message: "missing bearer token",
			Hint: "send Authorization: Bearer <JWT>; `lakegate token` makes one"})
		return
	}
	caller, err := s.verifier.verify(strings.TrimSpace(token))
	if err != nil {
		fail(c, err)
		return
	}
	c.Request = c.Request.WithContext(query.WithCaller(c.Request.Context(), caller))
	c.Set(subjectKey, caller.Subject)
}

// requireRole lets only callers holding role through (admin holds all).
func requireRole(role string) gin.HandlerFunc {
	return func(c *gin.Context) {
		caller, _ := query.CallerFrom(c.Request.Context())
		if !caller.HasRole(role) {
			fail(c, query.Errorf(query.KindForbidden, "this needs the %s role; the token has %v", role, caller.Roles))
		}
	}
}

func fail(c *gin.Context, err error) {
	_ = c.Error(err)
	c.Abort()
}
