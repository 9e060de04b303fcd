package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/metastore"
)

// DefaultDialTimeout is DialConfig.DialTimeout's default.
const DefaultDialTimeout = 5 * time.Second

// DialConfig says how a host reaches etcd: its endpoints, TLS with a CA
// of its own and a client certificate, and an etcd user. Every field but
// Endpoints is optional. Password is never shown in an error.
type DialConfig struct {
	// Endpoints are the members' client URLs (https://host:port,
	// http://host:port, unix://path, unixs://path) or host:port, without
	// credentials in them.
	Endpoints []string
	// CAFile is a PEM file of the CAs that verify etcd's server
	// certificate; CertFile and KeyFile a PEM client certificate and its
	// key, presented to etcd. Either makes the connections TLS (then no
	// endpoint may be http://); without CAFile the system's CAs verify.
	CAFile, CertFile, KeyFile string
	// Username and Password authenticate as an etcd user; they go
	// together.
	Username, Password string
	// DialTimeout bounds the wait for the first connection (when there is
	// a user, Dial authenticates over it) and each request's wait for a
	// connection that is down. 0 means DefaultDialTimeout.
	DialTimeout time.Duration
}

// TLS reports whether the connections are TLS connections the
// configuration sets up.
func (c DialConfig) TLS() bool { return c.CAFile != "" || c.CertFile != "" }

// check refuses a configuration that cannot work.
func (c DialConfig) check() error {
	switch {
	case len(c.Endpoints) == 0:
		return &cutline.ConfigError{Field: "Endpoints", Reason: "required"}
	case (c.CertFile == "") != (c.KeyFile == ""):
		return &cutline.ConfigError{Field: "KeyFile", Value: c.KeyFile, Reason: "goes with CertFile"}
	case (c.Username == "") != (c.Password == ""):
		return &cutline.ConfigError{Field: "Password", Reason: "goes with Username"}
	case c.DialTimeout < 0:
		return &cutline.ConfigError{Field: "DialTimeout", Value: c.DialTimeout, Reason: "must not be negative"}
	}
	for i, ep := range c.Endpoints {
		field := fmt.Sprintf("Endpoints[%d]", i)
		if reason := checkEndpoint(ep); reason != "" {
			return &cutline.ConfigError{Field: field, Value: fmt.Sprintf("%q", redactEndpoint(ep)), Reason: reason}
		}
		// The etcd client talks plain text to an http:// endpoint
		// whatever TLS it is given.
		if c.TLS() && strings.HasPrefix(ep, "http://") {
			return &cutline.ConfigError{Field: field, Value: fmt.Sprintf("%q", ep), Reason: "is plain text, with CAFile or CertFile: give https:// or host:port"}
		}
	}
	return nil
}

// ClientConfig returns the client configuration Dial uses: the files are
// read, the pairs checked. A host that needs more of the client's
// settings starts from it and calls clientv3.New itself. A refused
// setting or an unreadable file is a *cutline.ConfigError naming the field.
func (c DialConfig) ClientConfig() (clientv3.Config, error) {
	if err := c.check(); err != nil {
		return clientv3.Config{}, err
	}
	cfg := clientv3.Config{Endpoints: c.Endpoints, DialTimeout: c.DialTimeout, Logger: zap.NewNop(),
		Username: c.Username, Password: c.Password}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if !c.TLS() {
		return cfg, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		raw, err := os.ReadFile(c.CAFile)
		if err != nil {
			return clientv3.Config{}, &cutline.ConfigError{Field: "CAFile", Reason: "unreadable", Err: err}
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(raw) {
			return clientv3.Config{}, &cutline.ConfigError{Field: "CAFile", Value: c.CAFile, Reason: "holds no PEM certificate"}
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return clientv3.Config{}, &cutline.ConfigError{Field: "CertFile", Value: c.CertFile, Reason: "no certificate and key pair with KeyFile", Err: err}
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	cfg.TLS = tc
	return cfg, nil
}

// Dial returns a client of etcd as c says, for New. ctx bounds the dial
// (with DialTimeout); the client outlives it, and the caller closes it.
// With a user, Dial waits for a connection and authenticates, so that a
// refused password is Dial's error; a certificate etcd does not trust is
// Dial's error with a user, and the first request's otherwise.
//
// A refused configuration is a *cutline.ConfigError (cutline.ErrInvalid); a
// connection that did not come up in time matches
// metastore.ErrUnavailable. No error holds the password, nor any
// credential an endpoint carries.
func Dial(ctx context.Context, c DialConfig) (*clientv3.Client, error) {
	cfg, err := c.ClientConfig()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		cfg.DialTimeout = max(min(cfg.DialTimeout, time.Until(dl)), time.Millisecond)
	}
	cli, err := clientv3.New(cfg)
	if err == nil {
		return cli, nil
	}
	at := redactEndpoints(c.Endpoints)
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("etcd at %s: %w", at, cerr)
	}
	cause := err
	if c.Password != "" && strings.Contains(err.Error(), c.Password) {
		// The client's errors are not known to quote the password; if
		// one ever did, only its text, redacted, goes on.
		cause = errors.New(strings.ReplaceAll(err.Error(), c.Password, "<password>"))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("etcd at %s: %w: %w", at, metastore.ErrUnavailable, cause)
	}
	return nil, fmt.Errorf("etcd at %s: %w", at, cause)
}
