package settletest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

func put(key string) metastore.Txn {
	return metastore.Txn{Then: []metastore.Op{{Key: key, Value: []byte("v")}}}
}

// Crashing before the request: it never arrives, and from then on every
// request fails, the process's context is cancelled and the switch says
// where it fired.
func TestKillSwitchBefore(t *testing.T) {
	ctx := context.Background()
	raw := memstore.New(memstore.Options{})
	k := settletest.NewKillSwitch(2, false)
	pctx := k.Bind(ctx)
	s := k.Store(raw)

	_, err := s.Txn(pctx, put("k1"))
	require.NoError(t, err)
	require.False(t, k.Dead())
	fired, _ := k.Report()
	require.False(t, fired)

	_, err = s.Txn(pctx, put("k2"))
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	require.ErrorIs(t, err, settletest.ErrCrashed)
	require.True(t, k.Dead())
	fired, what := k.Report()
	require.True(t, fired)
	require.Equal(t, "txn k2", what)
	<-k.Fired()
	require.ErrorIs(t, pctx.Err(), context.Canceled)

	_, err = raw.Get(ctx, "k2")
	require.ErrorIs(t, err, metastore.ErrNotFound, "the crashed request never arrived")
	_, err = s.Get(ctx, "k1")
	require.ErrorIs(t, err, settletest.ErrCrashed, "a dead process reads nothing")
	_, _, err = s.List(ctx, "")
	require.ErrorIs(t, err, settletest.ErrCrashed)
	_, err = s.Txn(ctx, put("k3"))
	require.ErrorIs(t, err, settletest.ErrCrashed)
	fired, what = k.Report()
	require.True(t, fired)
	require.Equal(t, "txn k2", what, "the switch fires once")
}

// Crashing after the request: it is carried out, and its answer lost.
func TestKillSwitchLostAnswer(t *testing.T) {
	ctx := context.Background()
	raw := memblob.New("a")
	k := settletest.NewKillSwitch(1, true)
	b := k.Bucket(raw)

	err := b.Create(ctx, "x", []byte("data"))
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.ErrorIs(t, err, settletest.ErrCrashed)
	<-k.Fired()
	got, err := raw.Get(ctx, "x")
	require.NoError(t, err, "the crashed request was carried out")
	require.Equal(t, []byte("data"), got)
	_, what := k.Report()
	require.Equal(t, "create a:x", what)

	_, err = b.Get(ctx, "x")
	require.ErrorIs(t, err, settletest.ErrCrashed)
	_, err = b.GetRange(ctx, "x", 0, 1)
	require.ErrorIs(t, err, settletest.ErrCrashed)
	_, err = b.List(ctx, "", "", 0)
	require.ErrorIs(t, err, settletest.ErrCrashed)
	require.ErrorIs(t, b.Delete(ctx, "x"), settletest.ErrCrashed)
	_, err = raw.Get(ctx, "x")
	require.NoError(t, err, "a dead process deletes nothing")
}

// A party with a kill switch makes every request through it; one without
// goes straight to the zones.
func TestPartyKill(t *testing.T) {
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	k := settletest.NewKillSwitch(1, false)
	crashing := e.NewParty("crashing", settletest.PartyOptions{Kill: k})
	_, err := crashing.Minter.Mint(ctx, "star", e.Constants(2, 4))
	require.ErrorIs(t, err, settletest.ErrCrashed)
	require.True(t, k.Dead())

	p := e.NewParty("host", settletest.PartyOptions{})
	rec, err := p.Minter.Mint(ctx, "star", e.Constants(2, 4))
	require.NoError(t, err)
	for _, z := range crashing.Buckets {
		_, err := z.Get(ctx, e.Key("star", rec.Epoch, 0))
		require.ErrorIs(t, err, settletest.ErrCrashed)
	}
	e.PutFlight(0, "star", rec.Epoch, 0, []byte("s|0|r0"))
	e.PutPoison(0, "star", rec.Epoch, 0) // taken already: no error
	e.PutPoison(1, "star", rec.Epoch, 0)
	require.Equal(t, "F P E", e.State(rec, 0))
}
