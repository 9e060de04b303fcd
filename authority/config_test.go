package authority_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/metastore/memstore"
)

// A constructor missing what it requires names the one field it misses,
// the first one in argument order.
func TestRequiredArguments(t *testing.T) {
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: "node-a", Domain: "orders"}, time.Unix(0, 0))
	require.NoError(t, err)
	conn := &fakeConn{msgs: make(chan authority.Msg)}
	store := memstore.New(memstore.Options{})
	send := func(authority.Msg) {}
	for _, tc := range []struct {
		field string
		call  func() error
	}{
		{"rt", func() error { _, err := authority.NewAgent(nil, conn, nopHost{}, authority.AgentOptions{}); return err }},
		{"conn", func() error { _, err := authority.NewAgent(rt, nil, nopHost{}, authority.AgentOptions{}); return err }},
		{"host", func() error { _, err := authority.NewAgent(rt, conn, nil, authority.AgentOptions{}); return err }},
		{"el", func() error {
			_, err := authority.NewDriver(nil, &authority.Controller{}, send, authority.DriverOptions{})
			return err
		}},
		{"ctl", func() error {
			_, err := authority.NewDriver(&authority.Election{}, nil, send, authority.DriverOptions{})
			return err
		}},
		{"send", func() error {
			_, err := authority.NewDriver(&authority.Election{}, &authority.Controller{}, nil, authority.DriverOptions{})
			return err
		}},
		{"store", func() error {
			_, err := authority.Campaign(t.Context(), nil, "", "orders", "node-a", nil)
			return err
		}},
		{"sess", func() error {
			_, err := authority.Campaign(t.Context(), store, "", "orders", "node-a", nil)
			return err
		}},
	} {
		err := tc.call()
		require.ErrorIs(t, err, cutline.ErrInvalid, tc.field)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, tc.field)
		require.Equal(t, tc.field, ce.Field)
	}
}
