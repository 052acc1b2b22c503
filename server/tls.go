package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/quic-go/quic-go/http3"
)

// tlsConfig loads the server certificate and, for mutual TLS, the client
// CAs: with tls_client_ca_file every client must show a certificate signed
// by one of them. It returns nil without tls_cert_file.
func tlsConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls_cert_file/tls_key_file: %w", err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls_client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls_client_ca_file %s: no PEM certificate in it", clientCAFile)
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// altSvc advertises HTTP/3 on the UDP port of the same number, once Serve
// has opened it.
func (s *Server) altSvc(c *gin.Context) {
	if port := s.h3Port.Load(); port != 0 {
		c.Header("Alt-Svc", `h3=":`+strconv.Itoa(int(port))+`"; ma=86400`)
	}
	c.Next()
}

// serveHTTP3 serves the router over QUIC on the UDP port with the number
// of ln's TCP port, until shut down. It returns once the socket is open.
func (s *Server) serveHTTP3(ln net.Listener) (*http3.Server, <-chan error, error) {
	addr := ln.Addr().(*net.TCPAddr)
	pc, err := net.ListenPacket("udp", addr.String())
	if err != nil {
		return nil, nil, fmt.Errorf("http3: listen on udp %s: %w", addr, err)
	}
	h3 := &http3.Server{
		Handler:     h3Headers(s.router),
		TLSConfig:   http3.ConfigureTLSConfig(s.tls.Clone()),
		IdleTimeout: time.Duration(s.cfg.IdleTimeout),
		Logger:      s.log,
	}
	errc := make(chan error, 1)
	go func() {
		err := h3.Serve(pc)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		pc.Close()
		errc <- err
	}()
	s.h3Port.Store(int32(addr.Port))
	return h3, errc, nil
}

// h3Headers drops from an answer over HTTP/3 the connection-specific
// header fields HTTP/3 forbids (RFC 9114, 4.2): handlers written for
// HTTP/1.1 set some (the MCP SDK's event streams send Connection:
// keep-alive), and an HTTP/3 client refuses the whole answer for one.
// (HTTP/2's server drops them itself.)
func h3Headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&h3Writer{ResponseWriter: w}, r)
	})
}

// h3Writer is an HTTP/3 answer whose header loses its connection-specific
// fields when it goes out.
type h3Writer struct {
	http.ResponseWriter
	sent bool // the header is out
}

// connectionFields are the header fields that name or shape a connection.
var connectionFields = [...]string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"}

func (w *h3Writer) WriteHeader(code int) {
	if !w.sent {
		h := w.Header()
		for _, k := range connectionFields {
			h.Del(k)
		}
		w.sent = code >= 200 // an informational answer has a header of its own
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *h3Writer) Write(b []byte) (int, error) {
	if !w.sent {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends what is written so far (event streams, /all).
func (w *h3Writer) Flush() {
	if !w.sent {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the stream (deadlines).
func (w *h3Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
