package node

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/examples/internal/selfsigned"
)

// Security is what protects a process: its certificate (the API's server
// certificate, and its identity on the control plane), the CA of the
// control plane, and the API's bearer token. None of it is ever logged.
type Security struct {
	Cert  tls.Certificate // empty: the API is served without TLS (-insecure)
	ca    *x509.CertPool  // nil: no control plane over the network
	Token []byte          // nil: the API takes requests without a token (-insecure)
	// caFile is the file of the certificate made for the run, tokenFile
	// the token's ("" when neither is known): what a client is given.
	caFile, tokenFile string
}

// makesCredentials reports whether the process makes its API's
// certificate and token for the run: the controller and a broker in one
// process (-role all, on whatever metastore and zones), given neither of
// its own, without -insecure.
func (c *Settings) makesCredentials() bool {
	return c.Role == RoleAll && !c.insecure && c.tlsCert == "" && c.authTokenFile == ""
}

// APITLS is the API's server TLS configuration, nil without a
// certificate. With a CA, a client may present a certificate, verified
// against it: the health route requires a node's (the peers' pings); the
// other routes take the bearer token, with or without one.
func (s *Security) APITLS() *tls.Config {
	if len(s.Cert.Certificate) == 0 {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{s.Cert}}
	if s.ca != nil {
		cfg.ClientCAs, cfg.ClientAuth = s.ca, tls.VerifyClientCertIfGiven
	}
	return cfg
}

// loadSecurity reads the certificate, the CA and the token the flags
// name. Unless -insecure, the API needs TLS and a token: a -role all
// process given neither (on its embedded etcd, or on -etcd) makes its
// own, a self-signed certificate for localhost and a random token, in
// files under dir (mode 0600) whose paths it logs.
func loadSecurity(cfg *Settings, dir string, log *slog.Logger) (*Security, error) {
	s := &Security{}
	if cfg.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
		}
		s.Cert = cert
		if cfg.Role == roleBroker || len(cfg.peers) > 0 {
			// The certificate is the node's identity, to the controller
			// and to the peers' pings (authhttp.Pinger checks that the
			// answering certificate names the peer it meant).
			leaf, err := x509.ParseCertificate(cert.Certificate[0])
			if err != nil {
				return nil, fmt.Errorf("-tls-cert: %w", err)
			}
			want := fmt.Sprintf("%s://%s/%s", authhttp.IdentityScheme, authhttp.IdentityHost, cfg.node)
			id, err := authhttp.NodeIdentity(leaf)
			switch {
			case err != nil:
				return nil, fmt.Errorf("-tls-cert %s must carry the single URI SAN %s: %w", cfg.tlsCert, want, err)
			case id != cfg.node:
				return nil, fmt.Errorf("-tls-cert %s names the node %q; it must name -node with the URI SAN %s", cfg.tlsCert, id, want)
			}
		}
	}
	if cfg.tlsCA != "" {
		raw, err := os.ReadFile(cfg.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		s.ca = x509.NewCertPool()
		if !s.ca.AppendCertsFromPEM(raw) {
			return nil, fmt.Errorf("-tls-ca %s: no PEM certificate in it", cfg.tlsCA)
		}
	}
	if cfg.authTokenFile != "" {
		raw, err := os.ReadFile(cfg.authTokenFile)
		if err != nil {
			return nil, fmt.Errorf("-auth-token-file: %w", err)
		}
		if s.Token = bytes.TrimSpace(raw); len(s.Token) == 0 {
			return nil, fmt.Errorf("-auth-token-file %s is empty", cfg.authTokenFile)
		}
		s.tokenFile = cfg.authTokenFile
		if fi, err := os.Stat(cfg.authTokenFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			log.Warn("the token file is readable by others than its owner", "file", cfg.authTokenFile, "mode", fi.Mode().Perm())
		}
	}
	switch {
	case cfg.Role == roleController:
		return s, nil // it serves no API
	case cfg.insecure:
		if s.APITLS() == nil || s.Token == nil {
			log.Warn("INSECURE: the API is served without TLS or without a bearer token (-insecure)", "tls", s.APITLS() != nil, "auth", s.Token != nil)
		}
		return s, nil
	case cfg.makesCredentials() && dir != "":
		cert, token, err := selfsigned.Make(dir, cfg.node)
		if err != nil {
			return nil, err
		}
		s.Cert, s.Token = cert, token
		s.caFile, s.tokenFile = filepath.Join(dir, selfsigned.CAFile), filepath.Join(dir, selfsigned.TokenFile)
		log.Info("made credentials for this run: a self-signed certificate for localhost and a bearer token, made anew at every start (-tls-cert, -tls-key and -auth-token-file give your own)",
			"ca", s.caFile, "token_file", s.tokenFile)
		return s, nil
	case s.APITLS() == nil || s.Token == nil:
		return nil, errors.New("the API needs -tls-cert, -tls-key and -auth-token-file (or -insecure, which serves it unprotected)")
	}
	return s, nil
}

// apiURL is the base URL a client on this machine reaches the API at
// listen by, under a name the run's certificate holds (localhost,
// 127.0.0.1 or ::1).
func apiURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "https://localhost:8080"
	}
	switch host {
	case "127.0.0.1", "::1":
	default:
		host = "localhost"
	}
	return "https://" + net.JoinHostPort(host, port)
}
