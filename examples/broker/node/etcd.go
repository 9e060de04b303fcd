package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdAuth is how a process reaches etcd, which holds the grants, the
// epochs and the index: over TLS with a CA of its own (CA) and a client
// certificate (Cert, Key), and as an etcd user (User, Password). Each is
// optional; none of it is ever logged.
type etcdAuth struct {
	CA, Cert, Key  string
	User, Password string
}

// tls reports whether the connections to etcd are TLS connections the
// flags configure.
func (a etcdAuth) tls() bool { return a.CA != "" || a.Cert != "" }

// check refuses etcd flags that do not go together. endpoints is -etcd.
func (a etcdAuth) check(endpoints string) error {
	given := a.tls() || a.Key != "" || a.User != "" || a.Password != ""
	switch {
	case given && endpoints == "":
		return errors.New("-etcd-ca, -etcd-cert, -etcd-key, -etcd-user and -etcd-password need -etcd")
	case (a.Cert == "") != (a.Key == ""):
		return errors.New("-etcd-cert and -etcd-key go together")
	case (a.User == "") != (a.Password == ""):
		return errors.New("-etcd-user and -etcd-password go together")
	}
	if a.tls() {
		for e := range strings.SplitSeq(endpoints, ",") {
			// The etcd client talks plain text to an http:// endpoint
			// whatever TLS it is given.
			if strings.HasPrefix(e, "http://") {
				return Refuse("etcd", endpoints, "https:// endpoints, or host:port, with -etcd-ca or -etcd-cert: %s is plain text", e)
			}
		}
	}
	return nil
}

// clientConfig is the etcd client's configuration for endpoints.
func (a etcdAuth) clientConfig(endpoints []string) (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: a.User, Password: a.Password}
	if !a.tls() {
		return cfg, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.CA != "" {
		raw, err := os.ReadFile(a.CA)
		if err != nil {
			return cfg, fmt.Errorf("-etcd-ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(raw) {
			return cfg, fmt.Errorf("-etcd-ca %s: no PEM certificate in it", a.CA)
		}
	}
	if a.Cert != "" {
		cert, err := tls.LoadX509KeyPair(a.Cert, a.Key)
		if err != nil {
			return cfg, fmt.Errorf("-etcd-cert/-etcd-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	cfg.TLS = tc
	return cfg, nil
}

// newEtcdClient returns a client of etcd at -etcd, as the etcd flags say.
// A refusal by etcd (a bad password, a certificate it does not trust) is
// an error of the client's first request at the latest.
func newEtcdClient(c *Settings) (*clientv3.Client, error) {
	cfg, err := c.etcdAuth.clientConfig(strings.Split(c.Etcd, ","))
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		// The client's errors name endpoints and causes, never the
		// password.
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}
