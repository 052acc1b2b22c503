package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

// The algorithms of asymmetric keys (PEM files and JWK Sets).
const (
	algRS256 = "RS256"
	algES256 = "ES256"
	algEdDSA = "EdDSA"
	algHS256 = "HS256"
)

// minRSABits is the smallest RSA key accepted.
const minRSABits = 2048

// JWKS fetching: timeout of one fetch, the regular refresh, and how often
// an unknown kid may trigger an early one.
const (
	jwksTimeout        = 10 * time.Second
	jwksRefresh        = time.Hour
	jwksUnknownRefresh = time.Minute
)

// keySet holds the keys that verify bearer tokens, each pinned to one
// algorithm: the HS256 secret, public keys from PEM files, a JWK Set.
// It is safe for concurrent use; close ends the JWK Set's refreshes.
type keySet struct {
	secret []byte
	// public maps an algorithm to the PEM files' keys of that algorithm.
	public map[string][]any
	jwks   jwkSource
	stop   context.CancelFunc
	// client fetches the JWK Set; close drops its idle connections.
	client *http.Client
	// wait, when set, waits for what the set started besides keyfunc's
	// refresh (an authorization server's discovery); close calls it after
	// stop.
	wait func()
	// algs are the accepted algorithms, sorted: no other (none included)
	// reaches a key.
	algs []string
}

// jwkSource finds a token's keys in a JWK Set: a keyfunc.Keyfunc, or an
// authorization server's set found through its metadata.
type jwkSource interface {
	KeyfuncCtx(ctx context.Context) jwt.Keyfunc
}

var (
	_ jwkSource = keyfunc.Keyfunc(nil)
	_ jwkSource = (*issuerKeys)(nil)
)

// loadKeys reads the configured keys. With a JWKS URL it fetches the set
// once and starts keyfunc's refresh goroutine (newJWKS), which close
// ends.
func loadKeys(cfg config.Config, log *slog.Logger) (*keySet, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := &keySet{public: map[string][]any{}}
	if cfg.JWTSecret != "" {
		if len(cfg.JWTSecret) < config.MinSecretBytes {
			return nil, fmt.Errorf("jwt secret must be at least %d bytes", config.MinSecretBytes)
		}
		k.secret = []byte(cfg.JWTSecret)
		k.algs = append(k.algs, algHS256)
	}
	for i, path := range cfg.JWTPublicKeyFiles {
		alg, key, err := readPublicKey(path)
		if err != nil {
			return nil, fmt.Errorf("jwt_public_key_files[%d] %s: %w", i, path, err)
		}
		k.public[alg] = append(k.public[alg], key)
		k.algs = append(k.algs, alg)
	}
	if cfg.JWTJWKSURL != "" {
		ctx, stop := context.WithCancel(context.Background())
		client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		jwks, err := newJWKS(ctx, cfg.JWTJWKSURL, client, log, "jwt_jwks_url")
		if err != nil {
			stop()
			return nil, fmt.Errorf("jwt_jwks_url: %w", err)
		}
		k.jwks, k.stop, k.client = jwks, stop, client
		k.algs = append(k.algs, algRS256, algES256, algEdDSA)
	}
	slices.Sort(k.algs)
	k.algs = slices.Compact(k.algs)
	return k, nil
}

// newJWKS fetches the JWK Set at url once (a failure is logged under
// setting: the set is fetched again on an unknown kid and every hour) and
// starts keyfunc's refresh goroutine, which ends with ctx.
func newJWKS(ctx context.Context, url string, client *http.Client, log *slog.Logger, setting string) (keyfunc.Keyfunc, error) {
	return keyfunc.NewDefaultOverrideCtx(ctx, []string{url}, keyfunc.Override{
		Client:            client,
		HTTPTimeout:       jwksTimeout,
		RefreshInterval:   jwksRefresh,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(jwksUnknownRefresh), 1),
		// Bounds both the wait for a refresh slot (a token with an
		// unknown kid is refused at once when none is near) and the
		// refresh itself.
		RateLimitWaitMax: jwksTimeout,
		RefreshErrorHandlerFunc: func(string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				log.Warn(setting+": fetching the key set failed", lakegate.LogError, err.Error())
			}
		},
	})
}

// close ends the JWK Set refresh; it is idempotent.
func (k *keySet) close() {
	if k.stop != nil {
		k.stop()
		if k.wait != nil {
			k.wait()
		}
		k.client.CloseIdleConnections()
	}
}

// keyfunc returns the jwt.Keyfunc of requests under ctx: the secret for
// HS256, else the keys of the token's algorithm (the JWK Set's by kid).
func (k *keySet) keyfunc(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		alg := t.Method.Alg()
		if alg == algHS256 {
			if k.secret == nil {
				return nil, errNoKey
			}
			return k.secret, nil
		}
		keys := slices.Clone(k.public[alg])
		if k.jwks != nil {
			found, err := k.jwks.KeyfuncCtx(ctx)(t)
			switch {
			case errors.Is(err, errIssuerKeys):
				return nil, err
			case err != nil && len(keys) == 0:
				if _, hasKID := t.Header["kid"]; hasKID {
					return nil, fmt.Errorf("%w: %w", errUnknownKID, err)
				}
				return nil, err
			case err == nil:
				keys = append(keys, fitting(alg, found)...)
			}
		}
		if len(keys) == 0 {
			return nil, errNoKey
		}
		set := jwt.VerificationKeySet{}
		for _, key := range keys {
			set.Keys = append(set.Keys, key)
		}
		return set, nil
	}
}

// fitting keeps the JWK Set keys (one key or a set) whose type fits alg,
// so that a key is only ever used with its own algorithm.
func fitting(alg string, found any) []any {
	var all []any
	switch f := found.(type) {
	case jwt.VerificationKeySet:
		for _, key := range f.Keys {
			all = append(all, key)
		}
	default:
		all = []any{found}
	}
	var out []any
	for _, key := range all {
		if keyAlg(key) == alg {
			out = append(out, key)
		}
	}
	return out
}

// keyAlg is the one algorithm a public key verifies, or "" for a key of
// another kind.
func keyAlg(key any) string {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() >= minRSABits {
			return algRS256
		}
	case ed25519.PublicKey:
		return algEdDSA
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() {
			return algES256
		}
	}
	return ""
}

// readPublicKey reads a PEM public key (PUBLIC KEY, RSA PUBLIC KEY or a
// CERTIFICATE's key) and returns it with its algorithm.
func readPublicKey(path string) (string, any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return "", nil, errors.New("no PEM block found: want -----BEGIN PUBLIC KEY-----")
	}
	var key any
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	default:
		if strings.Contains(block.Type, "PRIVATE") {
			return "", nil, fmt.Errorf("is a private key: give its public key (openssl pkey -in KEY -pubout)")
		}
		return "", nil, fmt.Errorf("PEM block %q: want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", block.Type)
	}
	if err != nil {
		return "", nil, fmt.Errorf("parse %s: %w", block.Type, err)
	}
	alg := keyAlg(key)
	if alg == "" {
		return "", nil, fmt.Errorf("a %T key is not accepted: want RSA (at least %d bits, RS256), Ed25519 (EdDSA) or ECDSA P-256 (ES256)", key, minRSABits)
	}
	return alg, key, nil
}
