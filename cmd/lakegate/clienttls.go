package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
)

// tlsFlags are the TLS options of the commands that call a server
// (fetch, admin): the CA to trust, and a client certificate for servers
// that require one (tls_client_ca_file).
type tlsFlags struct {
	caFile, certFile, keyFile string
}

// add registers --ca-file, --cert and --key on cmd (on its subcommands
// too when persistent).
func (f *tlsFlags) add(cmd *cobra.Command, persistent bool) {
	fs := cmd.Flags()
	if persistent {
		fs = cmd.PersistentFlags()
	}
	fs.StringVar(&f.caFile, "ca-file", "", "PEM file of the CA that signed the server's certificate (default: the system's roots)")
	fs.StringVar(&f.certFile, "cert", "", "PEM file of a client certificate, for a server that requires one (mutual TLS)")
	fs.StringVar(&f.keyFile, "key", "", "PEM file of --cert's private key (default: --cert's own file)")
}

// config trusts the system roots, or the CA in caFile, and shows the
// client certificate when one is given.
func (f tlsFlags) config() (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", f.caFile)
		}
		conf.RootCAs = roots
	}
	switch {
	case f.certFile != "":
		key := f.keyFile
		if key == "" {
			key = f.certFile
		}
		cert, err := tls.LoadX509KeyPair(f.certFile, key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	case f.keyFile != "":
		return nil, errors.New("--key needs --cert")
	}
	return conf, nil
}

// transport is an HTTP transport with the flags' TLS settings (configure
// adjusts it), which explains a connection a server cuts after asking
// for a client certificate: for want of one, or refusing the one given
// (certRefusal).
func (f tlsFlags) transport(configure func(*http.Transport)) (http.RoundTripper, error) {
	conf, err := f.config()
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{TLSClientConfig: conf}
	if configure != nil {
		configure(tr)
	}
	asked := &atomic.Bool{}
	certs := conf.Certificates
	conf.Certificates = nil
	conf.GetClientCertificate = func(info *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		asked.Store(true)
		// As crypto/tls picks without the callback: the first certificate
		// the server's request accepts, else none.
		for i := range certs {
			if info.SupportsCertificate(&certs[i]) == nil {
				return &certs[i], nil
			}
		}
		return &tls.Certificate{}, nil
	}
	return certRefusal{base: tr, asked: asked}, nil
}

// certRefusal turns a connection cut after a TLS handshake in which the
// server asked for a client certificate (this client had none, or one the
// server then refused) into the certificate_required alert: under TLS 1.3
// the server checks the certificate only after the client has finished
// its handshake, and the client may see the cut (a reset, an EOF,
// HTTP/2's "client conn could not be established") before the alert. So
// the failure is final, not retried, and explain names what to change.
type certRefusal struct {
	base  *http.Transport
	asked *atomic.Bool
}

func (t certRefusal) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil && t.asked.Load() && cutAfterHandshake(err) {
		if _, ok := tlsAlert(err); !ok {
			err = fmt.Errorf("%w: %w", err, alertCertificateRequired)
		}
	}
	return resp, err
}

// CloseIdleConnections closes the transport's idle connections.
func (t certRefusal) CloseIdleConnections() { t.base.CloseIdleConnections() }

// cutAfterHandshake reports whether err is a connection cut short.
func cutAfterHandshake(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "client conn could not be established")
}

// explain adds the next step to a failure that looks like a server
// refusing the client's certificate, or the lack of one.
func (f tlsFlags) explain(server string, err error) error {
	if err == nil {
		return nil
	}
	if alert, ok := tlsAlert(err); ok {
		switch {
		case f.certFile == "" && (alert == alertCertificateRequired || alert == alertBadCertificate || alert == alertHandshakeFailure):
			return fmt.Errorf("%w (the server asks for a client certificate: pass --cert and --key)", err)
		case f.certFile != "" && (alert == alertCertificateRequired || alert == alertBadCertificate ||
			alert == alertUnsupportedCertificate || alert == alertCertificateExpired || alert == alertUnknownCA):
			// A client sends no certificate the server's CAs did not sign:
			// the server then finds none.
			return fmt.Errorf("%w (the server refused the certificate in %s, or it is not signed by a CA the server trusts)", err, f.certFile)
		}
	}
	u, _ := url.Parse(server)
	if f.certFile == "" && u != nil && u.Scheme == "https" &&
		(errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
		// TLS 1.3: the server checks the certificate after the client has
		// finished its handshake, and may cut the connection before the
		// client reads its alert.
		return fmt.Errorf("%w (if the server requires client certificates, pass --cert and --key)", err)
	}
	return err
}

// TLS alerts (RFC 8446, section 6) that refuse a client certificate.
const (
	alertHandshakeFailure       tls.AlertError = 40
	alertBadCertificate         tls.AlertError = 42
	alertUnsupportedCertificate tls.AlertError = 43
	alertCertificateExpired     tls.AlertError = 45
	alertUnknownCA              tls.AlertError = 48
	alertCertificateRequired    tls.AlertError = 116
)

// tlsAlert finds the alert a TLS peer sent. Over TCP crypto/tls reports
// it as a *net.OpError with Op "remote error" around a value of its own
// unexported alert type (a uint8); over QUIC as a tls.AlertError.
func tlsAlert(err error) (tls.AlertError, bool) {
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return alert, true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" && op.Err != nil {
		if v := reflect.ValueOf(op.Err); v.Kind() == reflect.Uint8 {
			return tls.AlertError(v.Uint()), true
		}
	}
	return 0, false
}
