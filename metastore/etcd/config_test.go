package etcd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cutline/cutline"
)

func TestCheckEndpoint(t *testing.T) {
	cases := []struct {
		ep     string
		reason string // "" when the endpoint is fine, else a part of the reason
	}{
		{"http://127.0.0.1:2379", ""},
		{"https://etcd-0.etcd.svc.cluster.local:2379", ""},
		{"http://[::1]:2379", ""},
		{"http://localhost:2379/", ""},
		{"127.0.0.1:2379", ""},
		{"etcd_0.internal:2379", ""},
		{"[fe80::1]:2379", ""},
		{"unix:///var/run/etcd.sock", ""},
		{"unixs://etcd.sock:0", ""},
		{"unix:etcd.sock", ""},

		{"", "empty"},
		{"localhost", "not host:port"},
		{"http://localhost", "not host:port"},
		{"http://:2379", "no host"},
		{":2379", "no host"},
		{"localhost:http", "port is not a number"},
		{"localhost:0", "port is not a number"},
		{"localhost:70000", "port is not a number"},
		{"http://local host:2379", "space"},
		{"http://a\x01b:2379", "control character"},
		{"ftp://localhost:2379", `scheme "ftp"`},
		{"dns:///etcd:2379", `scheme "dns"`},
		{"http://localhost:2379/v3", "path"},
		{"http://localhost:2379?x=1", "query"},
		{"etcd/0:2379", "not a URL"},
		{"http://bad%zzhost:2379", "not a URL"},
		{"http://ex*ample.com:2379", "neither an IP address nor a host name"},
		{"http://root:s3cret@localhost:2379", "holds credentials"},
		{"root:s3cret@localhost:2379", "holds credentials"},
		{"unix://", "no socket path"},
	}
	for _, tc := range cases {
		got := checkEndpoint(tc.ep)
		if tc.reason == "" {
			assert.Empty(t, got, "%q", tc.ep)
			continue
		}
		assert.Contains(t, got, tc.reason, "%q", tc.ep)
		assert.NotContains(t, got, "s3cret", "%q: a reason never quotes the endpoint", tc.ep)
	}
}

func TestRedactEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:2379":              "http://localhost:2379",
		"http://root:s3cret@localhost:2379":  "http://…@localhost:2379",
		"root:s3cret@localhost:2379":         "…@localhost:2379",
		"https://a@b:p@ss@etcd.example:2379": "https://…@etcd.example:2379",
	} {
		assert.Equal(t, want, redactEndpoint(in), in)
	}
}

// TestNewChecksClientEndpoints: New refuses a client whose endpoints the
// client would only fail to dial later, with a *cutline.ConfigError that names the
// endpoint's index and never shows credentials.
func TestNewChecksClientEndpoints(t *testing.T) {
	newClient := func(eps ...string) *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, Logger: zap.NewNop()})
		require.NoError(t, err, "clientv3.New does not dial")
		t.Cleanup(func() { _ = cli.Close() })
		return cli
	}
	_, err := New(newClient("http://127.0.0.1:2379", "127.0.0.1:22379"), Options{})
	require.NoError(t, err)

	_, err = New(newClient("http://127.0.0.1:2379", "http://root:s3cret@127.0.0.1:22379"), Options{})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	var ce *cutline.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "clientv3.Config.Endpoints[1]", ce.Field)
	assert.Equal(t, `"http://…@127.0.0.1:22379"`, ce.Value)
	assert.NotContains(t, err.Error(), "s3cret")
	assert.NotContains(t, err.Error(), "root")

	_, err = New(newClient("etcd-0"), Options{})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "clientv3.Config.Endpoints[0]", ce.Field)
	assert.ErrorContains(t, err, `"etcd-0"`)
	assert.ErrorContains(t, err, "not host:port")
}
