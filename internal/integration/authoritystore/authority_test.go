package authoritystore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authoritytest"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
)

// TestEtcdScenarios runs the authority scenarios on embedded etcd, each
// under its own root; a session's expiry is etcd's (the lease revoked on
// the server).
func TestEtcdScenarios(t *testing.T) {
	cli := etcdtest.Start(t)
	authoritytest.Run(t, authoritytest.Backend{
		NewStore: func(t *testing.T) metastore.Store {
			st, err := etcd.New(cli, etcd.Options{Root: "/authority/" + t.Name() + "/", RequestTimeout: 5 * time.Second})
			require.NoError(t, err)
			return st
		},
		Expire: func(t *testing.T, _ metastore.Store, sess metastore.Session) {
			// The controller key goes with the lease at once; the
			// session's own keep-alive learns it later, which the suite
			// does not wait for.
			_, err := cli.Revoke(t.Context(), clientv3.LeaseID(sess.ID()))
			require.NoError(t, err)
		},
	})
}

// TestEtcdLeaderRestartDuringHandoff runs a planned handoff on a
// three-member etcd cluster and crashes the etcd leader between the
// holder's drain and the durable transition. The controller's driver
// meets unknown outcomes, reloads, and the handoff completes: holder and
// token change in one transition, and no state without a holder is ever
// written.
func TestEtcdLeaderRestartDuringHandoff(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 3)
	cli := cluster.Client(t)
	ctx := t.Context()
	store, err := etcd.New(cli, etcd.Options{Root: "/authority-restart/", RequestTimeout: 3 * time.Second})
	require.NoError(t, err)
	sess, err := store.NewSession(ctx, 30*time.Second)
	require.NoError(t, err)
	defer sess.Close(context.Background())
	el, err := authority.Campaign(ctx, store, "", "orders", "ctl-1", sess)
	require.NoError(t, err)
	loaded, err := el.Load(ctx)
	require.NoError(t, err)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctl, err := authority.NewController(authority.ControllerConfig{Domain: "orders"}, loaded, clk.Now())
	require.NoError(t, err)
	var sent []authority.Msg
	d, err := authority.NewDriver(el, ctl, func(m authority.Msg) { sent = append(sent, m) }, authority.DriverOptions{Clock: clk})
	require.NoError(t, err)

	caps := authority.Capabilities{Vote: true, Promotable: true}
	require.NoError(t, d.Step(ctx, authority.Connect{Node: "node-a", Caps: caps}))
	require.NoError(t, d.Step(ctx, authority.Connect{Node: "node-b", Caps: caps}))
	require.NoError(t, d.Step(ctx, authority.Offer{Node: "node-a", Usable: true}))
	clk.Advance(authority.DefaultLease)
	require.NoError(t, d.Step(ctx, authority.Tick{Now: clk.Now()}))
	st := d.State()
	require.Equal(t, authority.Granted, st.Phase)
	require.Equal(t, "node-a", st.Holder)

	// Watch every state written from here on.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	states := make(chan authority.StateRecord, 64)
	go func() {
		defer close(states)
		for ev, err := range store.Watch(wctx, "authority/orders/state", st.Revision+1) {
			if err != nil {
				if wctx.Err() != nil {
					return
				}
				continue
			}
			var s authority.StateRecord
			if ev.Type == metastore.EventPut && metastore.DecodeRecord(ev.KV.Key, ev.KV.Value, "authority-state", 1, &s) == nil {
				s.Revision = ev.KV.Revision
				states <- s
			}
		}
	}()

	require.NoError(t, d.Step(ctx, authority.HandoffRequest{Target: "node-b"}))
	require.Equal(t, authority.Handoff, d.State().Phase)
	leader := cluster.Leader(t, 10*time.Second)
	leader.Stop()
	// The holder drained; its report reaches the controller while etcd
	// elects a new leader. Retried until the transition is durable.
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := d.Step(ctx, authority.Released{Node: "node-a", Token: st.Token, Progress: chain.Position{Epoch: 1, Slot: 9}})
		if err != nil && !errors.Is(err, authority.ErrRefused) {
			t.Logf("released during the leader restart: %v", err)
		}
		if cur := d.State(); cur.Phase == authority.Granted && cur.Holder == "node-b" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the handoff did not complete: %s", d.State())
		clk.Advance(100 * time.Millisecond)
	}
	leader.Restart(t)
	final := d.State()
	require.Equal(t, st.Token+1, final.Token)
	var readBack authority.StateRecord
	require.Eventually(t, func() bool {
		readBack, err = authority.Read(ctx, store, "", "orders")
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, "node-b", readBack.Holder)
	require.Equal(t, st.Token+1, readBack.Token)
	for {
		s, ok := <-states
		require.True(t, ok, "the watch ended before the final state")
		require.NotEqual(t, authority.Vacant, s.Phase, "a state without a holder was written: %s", s)
		if s.Revision >= readBack.Revision {
			break
		}
	}
}
