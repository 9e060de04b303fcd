package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
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

// dialConfig is how etcdstore.Dial reaches etcd at endpoints (-etcd).
func (a etcdAuth) dialConfig(endpoints string) etcdstore.DialConfig {
	return etcdstore.DialConfig{Endpoints: strings.Split(endpoints, ","), CAFile: a.CA, CertFile: a.Cert, KeyFile: a.Key,
		Username: a.User, Password: a.Password}
}

// etcdFlags names the flag of each field of etcdstore.DialConfig; the
// endpoints are -etcd.
var etcdFlags = map[string]string{"CAFile": "etcd-ca", "CertFile": "etcd-cert", "KeyFile": "etcd-key", "Username": "etcd-user", "Password": "etcd-password"}

// check refuses etcd flags that do not go together. endpoints is -etcd.
// What etcdstore.Dial would refuse (a certificate without its key, a
// user without a password, a plain-text endpoint with TLS, a file it
// cannot read) is refused here already, naming the flag.
func (a etcdAuth) check(endpoints string) error {
	given := a.tls() || a.Key != "" || a.User != "" || a.Password != ""
	switch {
	case given && endpoints == "":
		return errors.New("-etcd-ca, -etcd-cert, -etcd-key, -etcd-user and -etcd-password need -etcd")
	case endpoints == "":
		return nil
	}
	if _, err := a.dialConfig(endpoints).ClientConfig(); err != nil {
		flag := "etcd"
		if ce, ok := errors.AsType[*cutline.ConfigError](err); ok {
			flag = cmp.Or(etcdFlags[ce.Field], flag)
		}
		return fmt.Errorf("-%s: %w", flag, err)
	}
	return nil
}

// newEtcdClient returns a client of etcd at -etcd, as the etcd flags say.
// A refused password is its error; a certificate etcd does not trust is
// an error of the client's first request at the latest.
func newEtcdClient(ctx context.Context, c *Settings) (*clientv3.Client, error) {
	return etcdstore.Dial(ctx, c.etcdAuth.dialConfig(c.Etcd))
}
