package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/testutil"
)

var keyOnlyListening = regexp.MustCompile(`"msg":"lakegate listening".*?"url":"(http://127\.0\.0\.1:\d+)"`)

// TestServePublicKeyOnly: with an EdDSA public key and no secret the
// server starts, makes no secret and prints no tokens; the token command
// explains that it signs HS256 only.
func TestServePublicKeyOnly(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "ed.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}

	_, _, err = run(t, map[string]string{"LAKEGATE_JWT_PUBLIC_KEY_FILES": keyFile}, "token", "--sub", "a")
	if err == nil || !strings.Contains(err.Error(), "HS256") {
		t.Errorf("token: got %v, want an error saying it signs HS256 only", err)
	}

	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.LogFormat = "json"
	cfg.JWTPublicKeyFiles = []string{keyFile}
	r := startServe(t, cfg)
	m := r.await(t, &r.stderr, keyOnlyListening)
	if out := r.stdout.String(); strings.Contains(out, "token") {
		t.Errorf("got stdout %q, want no tokens printed", out)
	}

	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	claims := jwt.MapClaims{"sub": "e", "roles": []string{"reader"}, "exp": time.Now().Add(time.Hour).Unix()}
	ed, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	hs := testutil.Token(secret, "e", "reader")
	for tok, want := range map[string]int{ed: 200, hs: 401} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", m[1]+"/rest/databases", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("got %d, want %d", resp.StatusCode, want)
		}
	}
	if err := r.stop(); err != nil {
		t.Errorf("serve: got %v, want nil", err)
	}
}
