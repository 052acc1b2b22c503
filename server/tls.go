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
		Handler:     s.router,
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
