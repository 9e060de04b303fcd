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
	"strings"

	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/examples/internal/selfsigned"
)

// Security is what protects a process: its certificate (the API's, and
// its identity on the control plane), the control plane's CA, and the
// API's bearer token. None of it is ever logged.
type Security struct {
	Cert  tls.Certificate // empty: the API is served without TLS (-insecure)
	ca    *x509.CertPool  // nil: no control plane over the network
	Token []byte          // nil: the API takes requests without a token (-insecure)
	// The files of the run's certificate and of the token, when known:
	// what a client is given.
	caFile, tokenFile string
}

// makesCredentials reports whether the process makes its API's
// certificate and token for the run: -role all (on whatever metastore
// and zones), given neither of its own, without -insecure.
func (c *Settings) makesCredentials() bool {
	return c.Role == RoleAll && !c.insecure && c.tlsCert == "" && c.authTokenFile == ""
}

// APITLS is the API's server TLS configuration, nil without a
// certificate. With a CA, a client may present a certificate: the
// health route requires a node's (the peers' pings); the other routes
// take the bearer token, with or without one.
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
// process given neither makes its own, a self-signed certificate for
// localhost and a random token, in files under dir (mode 0600).
func loadSecurity(cfg *Settings, dir string, log *slog.Logger) (*Security, error) {
	s := &Security{}
	if cfg.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
		}
		s.Cert = cert
		// The certificate is the node's identity, to the controller and
		// to the peers' pings.
		if cfg.Role == roleBroker || len(cfg.peers) > 0 {
			want := fmt.Sprintf("%s://%s/%s", authhttp.IdentityScheme, authhttp.IdentityHost, cfg.node)
			leaf, err := x509.ParseCertificate(cert.Certificate[0])
			id := ""
			if err == nil {
				id, err = authhttp.NodeIdentity(leaf)
			}
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
		if s.ca = x509.NewCertPool(); !s.ca.AppendCertsFromPEM(raw) {
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
	case cfg.Role == roleController: // it serves no API
	case cfg.insecure && (s.APITLS() == nil || s.Token == nil):
		log.Warn("INSECURE: the API is served without TLS or without a bearer token (-insecure)", "tls", s.APITLS() != nil, "auth", s.Token != nil)
	case cfg.insecure:
	case cfg.makesCredentials() && dir != "":
		cert, token, err := selfsigned.Make(dir, cfg.node)
		if err != nil {
			return nil, err
		}
		s.Cert, s.Token = cert, token
		s.caFile, s.tokenFile = filepath.Join(dir, selfsigned.CAFile), filepath.Join(dir, selfsigned.TokenFile)
		log.Info("made credentials for this run: a self-signed certificate for localhost and a bearer token, made anew at every start (-tls-cert, -tls-key and -auth-token-file give your own)",
			"ca", s.caFile, "token_file", s.tokenFile)
	case s.APITLS() == nil || s.Token == nil:
		return nil, errors.New("the API needs -tls-cert, -tls-key and -auth-token-file (or -insecure, which serves it unprotected)")
	}
	return s, nil
}

// logCommands logs, once the API of a -role all process listens at addr,
// the commands that produce, consume, read the metrics and inspect the
// metastore: with the paths of the run's certificate and token, never
// the token. They hold no double quote, which a text log line would
// escape: the token goes to curl's --oauth2-bearer.
func (p *process) logCommands(addr net.Addr) {
	if p.cfg.Role != RoleAll {
		return
	}
	curl := "curl -s"
	if p.sec.caFile != "" {
		curl += " --cacert " + shellQuote(p.sec.caFile)
	}
	if p.sec.tokenFile != "" {
		curl += " --oauth2-bearer $(cat " + shellQuote(p.sec.tokenFile) + ")"
	}
	base := apiURL(addr.String())
	if p.sec.APITLS() == nil {
		base = "http" + strings.TrimPrefix(base, "https")
	}
	p.log.Info("paste to produce", "cmd", curl+" --data-binary hello "+base+"/v1/streams/orders/records")
	p.log.Info("paste to consume", "cmd", curl+" "+shellQuote(base+"/v1/streams/orders/records?offset=0&limit=10"))
	if p.cfg.metricsListen == "" {
		p.log.Info("paste to read the metrics", "cmd", curl+" "+base+"/metrics")
	}
	if p.be.local != nil {
		p.log.Info("paste to inspect the metastore", "cmd",
			"cutline -etcd "+p.be.local.Endpoint+" -etcd-root "+shellQuote(p.cfg.EtcdRoot)+" chain "+p.cfg.node)
	}
}

// apiURL is the base URL a client on this machine reaches the API at
// listen by, under a name the run's certificate holds.
func apiURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "https://localhost:8080"
	} else if host != "127.0.0.1" && host != "::1" {
		host = "localhost"
	}
	return "https://" + net.JoinHostPort(host, port)
}

// shellQuote quotes s for a POSIX shell unless it holds only letters,
// digits and /._-+:,=@%.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("/._-+:,=@%", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
