// Package testcert makes certificates for tests: a throwaway certificate
// authority that issues server certificates for 127.0.0.1 and client
// certificates, as files or in memory. Tests only.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority valid for an hour either side of now.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
	// File is the CA certificate, PEM.
	File string
}

// New makes a CA named name; its files live in a temporary directory of t.
func New(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: t.TempDir()}
	ca.File = ca.Write(t, name+"-ca.pem", pemBlock("CERTIFICATE", der))
	return ca
}

// Write puts data in a file named name beside the CA's and returns its path.
func (ca *CA) Write(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Issue signs a certificate for cn: a server's for 127.0.0.1 when server
// is true, else a client's. It returns the certificate and key files (PEM).
func (ca *CA) Issue(t testing.TB, cn string, server bool) (certFile, keyFile string) {
	t.Helper()
	der, key := ca.sign(t, cn, server)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = ca.Write(t, cn+".crt", pemBlock("CERTIFICATE", der))
	keyFile = ca.Write(t, cn+".key", pemBlock("EC PRIVATE KEY", keyDER))
	return certFile, keyFile
}

// Client signs a client certificate for cn, in memory.
func (ca *CA) Client(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	der, key := ca.sign(t, cn, false)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca *CA) sign(t testing.TB, cn string, server bool) ([]byte, *ecdsa.PrivateKey) {
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// Pool is a certificate pool holding the CA: a client's RootCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}
