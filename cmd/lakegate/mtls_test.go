package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/testcert"
)

var httpsURL = regexp.MustCompile(`"msg":"lakegate listening","url":"(https://[^"]+)"`)

// TestMutualTLS: fetch (HTTP/2 and HTTP/3) and admin reach a server that
// requires client certificates when given --cert/--key/--ca-file, and
// without a certificate, or with one the server does not trust, fail
// with the next step named.
func TestMutualTLS(t *testing.T) {
	ca, stranger := testcert.New(t, "lakegate-test"), testcert.New(t, "stranger")
	serverCert, serverKey := ca.Issue(t, "server", true)
	clientCert, clientKey := ca.Issue(t, "ops", false)
	strangerCert, strangerKey := stranger.Issue(t, "mallory", false)
	// One file with the certificate and its key: --key may be left out.
	certPEM, _ := os.ReadFile(clientCert)
	keyPEM, _ := os.ReadFile(clientKey)
	combined := ca.Write(t, "ops.pem", append(certPEM, keyPEM...))

	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.LogFormat = "json"
	cfg.JWTSecret = secret
	cfg.MCPEnabled = true
	cfg.MCPBlockThreshold = 4096
	cfg.MCPBlockSize = 2048
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = serverCert, serverKey, ca.File
	// A certificate alone may stand for its CN ("ops", an admin).
	cfg.TLSClientCertAuth, cfg.TLSClientCertRoles = true, []string{lakegate.RoleAdmin}
	r := startServe(t, cfg)
	base := r.await(t, &r.stderr, httpsURL)[1]
	env := map[string]string{"LAKEGATE_SERVER": base, "LAKEGATE_TOKEN": signed("agent", lakegate.RoleReader)}
	adminEnv := map[string]string{"LAKEGATE_SERVER": base, "LAKEGATE_TOKEN": signed("ops", lakegate.RoleAdmin)}
	withCert := []string{"--ca-file", ca.File, "--cert", clientCert, "--key", clientKey}
	dir := t.TempDir()

	first := filepath.Join(dir, "first.ndjson")
	_, errOut, err := run(t, env, append([]string{"fetch", "--database", "demo", "--sql", "SELECT * FROM readings ORDER BY id", "-o", first}, withCert...)...)
	if err != nil {
		t.Fatalf("fetch --sql with a client certificate: %v; stderr: %s", err, errOut)
	}
	id := ""
	summary := summaryLine.FindStringSubmatch(errOut)
	if summary != nil {
		id = summary[1]
	}
	a, err := os.ReadFile(first)
	if err != nil || id == "" || bytes.Count(a, []byte("\n")) < 100 {
		t.Fatalf("got %d bytes (%v) and transfer %q; stderr: %s", len(a), err, id, errOut)
	}
	second := filepath.Join(dir, "second.ndjson")
	if _, errOut, err := run(t, env, append([]string{"fetch", id, "-o", second, "--http3"}, withCert...)...); err != nil {
		t.Fatalf("fetch --http3 with a client certificate: %v; stderr: %s", err, errOut)
	}
	if b, _ := os.ReadFile(second); !bytes.Equal(a, b) {
		t.Errorf("fetch over HTTP/3: %d bytes, want the %d bytes of the export", len(b), len(a))
	}

	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    string   // in stdout
		wantErr []string // in the error
	}{
		{"admin with a certificate", adminEnv, append([]string{"admin", "mcp", "status"}, withCert...), "enabled since", nil},
		{"admin with the certificate alone", map[string]string{"LAKEGATE_SERVER": base},
			[]string{"admin", "mcp", "status", "--ca-file", ca.File, "--cert", combined}, "enabled since", nil},
		{"fetch with the certificate alone", map[string]string{"LAKEGATE_SERVER": base},
			[]string{"fetch", id, "--ca-file", ca.File, "--cert", combined, "-o", filepath.Join(dir, "third.ndjson")}, "", nil},
		{"admin without a certificate", adminEnv, []string{"admin", "mcp", "status", "--ca-file", ca.File}, "", []string{"--cert and --key"}},
		{"fetch without a certificate", env, []string{"fetch", id, "--ca-file", ca.File, "-o", filepath.Join(dir, "no.ndjson")}, "", []string{"--cert and --key"}},
		{"admin with an untrusted certificate", adminEnv, []string{"admin", "mcp", "status", "--ca-file", ca.File, "--cert", strangerCert, "--key", strangerKey}, "", []string{"refused the certificate"}},
		{"fetch with an untrusted certificate", env, []string{"fetch", id, "--ca-file", ca.File, "--cert", strangerCert, "--key", strangerKey, "-o", filepath.Join(dir, "no.ndjson")}, "", []string{"refused the certificate"}},
		{"a key that is not the certificate's", env, []string{"fetch", id, "--ca-file", ca.File, "--cert", clientCert, "--key", strangerKey}, "", []string{"--cert/--key"}},
		{"--key alone", adminEnv, []string{"admin", "mcp", "status", "--key", clientKey}, "", []string{"--key needs --cert"}},
		{"a missing certificate file", adminEnv, []string{"admin", "mcp", "status", "--cert", filepath.Join(dir, "nope.pem")}, "", []string{"--cert"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			out, errOut, err := run(t, tt.env, tt.args...)
			if tt.wantErr == nil {
				if err != nil || !strings.Contains(out, tt.want) {
					t.Fatalf("got %q, %v (stderr %q), want %q", out, err, errOut, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %q, want an error", out)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want it to contain %q", err, w)
				}
			}
			// A refused certificate is final: no retries.
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("failed after %v, want at once", d)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("got %d files in the output directory, want 3 (no partial file)", len(entries))
	}
}
