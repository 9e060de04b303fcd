package settle_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/config"
	"github.com/cutline/cutline/metastore"
	memstore "github.com/cutline/cutline/metastore/mem"
	"github.com/cutline/cutline/settle"
)

func flight(ep, slot uint64, payload []byte) chain.Flight {
	return chain.Flight{Position: chain.Position{Epoch: ep, Slot: slot}, Payload: payload}
}

func newRefIndex(t *testing.T, locate settle.Locator) (*settle.RefIndex, *memstore.Store) {
	store := memstore.New(memstore.Options{})
	x, err := settle.NewRefIndex(store, "tenant/", locate)
	require.NoError(t, err)
	return x, store
}

func TestRefIndexCoverIsIdempotent(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locate)
	f := flight(3, 7, record(stream, 42, "r"))
	require.NoError(t, x.Cover(ctx, starA, f))
	rev := store.Revision()
	require.NoError(t, x.Cover(ctx, starA, f), "covering the same flight again changes nothing")
	require.Equal(t, rev, store.Revision())

	r, err := x.Lookup(ctx, stream, 42)
	require.NoError(t, err)
	require.Equal(t, settle.Ref{Header: r.Header, Stream: stream, Offset: 42, Count: 1, Star: starA, Epoch: 3, Slot: 7}, r)
	require.Equal(t, chain.Position{Epoch: 3, Slot: 7}, r.Position())
	kv, err := store.Get(ctx, "tenant/refs/s/00000000000000000042")
	require.NoError(t, err, "refs live at <root>refs/<stream>/<offset, 20 digits>")
	require.Contains(t, string(kv.Value), `"star": "star-a"`)

	_, err = x.Lookup(ctx, stream, 43)
	require.ErrorIs(t, err, metastore.ErrNotFound)
}

// A Cover whose write landed but whose answer was lost is simply repeated.
func TestRefIndexCoverAfterLostAnswer(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	k := newKillSwitch(1, true)
	x, err := settle.NewRefIndex(&crashStore{Store: store, k: k}, "", locate)
	require.NoError(t, err)
	f := flight(1, 0, record(stream, 0, "r"))
	require.ErrorIs(t, x.Cover(ctx, starA, f), metastore.ErrUnavailable)
	y, err := settle.NewRefIndex(store, "", locate)
	require.NoError(t, err)
	require.NoError(t, y.Cover(ctx, starA, f))
	require.Len(t, refsOf(t, y, stream), 1)
}

func TestRefIndexDoubleCover(t *testing.T) {
	ctx := context.Background()
	x, _ := newRefIndex(t, locate)
	require.NoError(t, x.Cover(ctx, starA, flight(1, 5, record(stream, 9, "r"))))
	for name, tc := range map[string]struct {
		star string
		f    chain.Flight
	}{
		"other slot":  {starA, flight(1, 6, record(stream, 9, "r"))},
		"other epoch": {starA, flight(2, 5, record(stream, 9, "r"))},
		"other star":  {starB, flight(1, 5, record(stream, 9, "r"))},
	} {
		t.Run(name, func(t *testing.T) {
			err := x.Cover(ctx, tc.star, tc.f)
			require.ErrorIs(t, err, settle.ErrDoubleCover)
			var de *settle.DoubleCoverError
			require.ErrorAs(t, err, &de)
			require.Equal(t, stream, de.Stream)
			require.Equal(t, uint64(9), de.Offset)
			require.Equal(t, chain.Position{Epoch: 1, Slot: 5}, de.Existing.Position())
			require.Equal(t, starA, de.Existing.Star)
			require.Equal(t, tc.f.Position, de.Offered.Position())
			require.Equal(t, tc.star, de.Offered.Star)
			require.Contains(t, err.Error(), "star-a/1/5")
		})
	}
	// The same position claiming a different run length is refused too.
	store := memstore.New(memstore.Options{})
	x2, err := settle.NewRefIndex(store, "", func([]byte) (string, uint64, uint64, error) { return stream, 9, 2, nil })
	require.NoError(t, err)
	require.NoError(t, x2.Cover(ctx, starA, flight(1, 5, nil)))
	x3, err := settle.NewRefIndex(store, "", locate)
	require.NoError(t, err)
	require.ErrorIs(t, x3.Cover(ctx, starA, flight(1, 5, record(stream, 9, "r"))), settle.ErrDoubleCover)
	r, err := x.Lookup(ctx, stream, 9)
	require.NoError(t, err)
	require.Equal(t, uint64(5), r.Slot, "the existing ref is never overwritten")
}

func TestRefIndexRefsNextOrder(t *testing.T) {
	ctx := context.Background()
	x, _ := newRefIndex(t, func(p []byte) (string, uint64, uint64, error) {
		var s string
		var off, n uint64
		_, err := fmt.Sscanf(string(p), "%s %d %d", &s, &off, &n)
		return s, off, n, err
	})
	n, err := x.Next(ctx, stream)
	require.NoError(t, err)
	require.Zero(t, n, "an empty stream starts at 0")
	// Offsets whose decimal strings sort differently than their values.
	for i, run := range []struct{ off, n uint64 }{{100, 5}, {2, 8}, {10, 90}, {0, 2}} {
		require.NoError(t, x.Cover(ctx, starA, flight(1, uint64(i), fmt.Appendf(nil, "%s %d %d", stream, run.off, run.n))))
	}
	require.NoError(t, x.Cover(ctx, starA, flight(1, 9, []byte("s2 0 3"))))
	var offs []uint64
	for _, r := range refsOf(t, x, stream) {
		offs = append(offs, r.Offset)
	}
	require.Equal(t, []uint64{0, 2, 10, 100}, offs, "refs come in offset order")
	n, err = x.Next(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(105), n)
	n, err = x.Next(ctx, "s2")
	require.NoError(t, err)
	require.Equal(t, uint64(3), n, "streams do not see each other's refs, even sharing a prefix")

	// Stopping early is fine.
	for r, err := range x.Refs(ctx, stream) {
		require.NoError(t, err)
		require.Equal(t, uint64(0), r.Offset)
		break
	}
}

func TestRefIndexBadInput(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("garbled")
	x, _ := newRefIndex(t, func(p []byte) (string, uint64, uint64, error) {
		switch string(p) {
		case "bad":
			return "", 0, 0, boom
		case "empty":
			return stream, 3, 0, nil
		}
		return string(p), 0, 1, nil
	})
	err := x.Cover(ctx, starA, flight(1, 0, []byte("bad")))
	require.ErrorIs(t, err, settle.ErrLocate)
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, x.Cover(ctx, starA, flight(1, 0, []byte("empty"))), settle.ErrLocate, "an empty run covers nothing")
	for _, name := range []string{"", "a/b", "..", ".hidden", "-x", "sp ace", "new\nline", string(make([]byte, 65))} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			require.ErrorIs(t, x.Cover(ctx, starA, flight(1, 0, []byte(name))), config.ErrInvalid)
			_, err := x.Lookup(ctx, name, 0)
			require.ErrorIs(t, err, config.ErrInvalid)
			_, err = x.Next(ctx, name)
			require.ErrorIs(t, err, config.ErrInvalid)
		})
	}
	for _, err := range x.Refs(ctx, "ok-stream") {
		require.NoError(t, err)
	}

	_, err = settle.NewRefIndex(nil, "", locate)
	require.ErrorIs(t, err, config.ErrInvalid)
	_, err = settle.NewRefIndex(memstore.New(memstore.Options{}), "", nil)
	require.ErrorIs(t, err, config.ErrInvalid)
	_, err = settle.NewRefIndex(memstore.New(memstore.Options{}), "no-slash", locate)
	require.ErrorIs(t, err, config.ErrInvalid)
}

// A ref whose key and body disagree (hand-edited or corrupt) is reported,
// not trusted.
func TestRefIndexCorruptRef(t *testing.T) {
	ctx := context.Background()
	x, store := newRefIndex(t, locate)
	require.NoError(t, x.Cover(ctx, starA, flight(1, 0, record(stream, 4, "r"))))
	kv, err := store.Get(ctx, "tenant/refs/s/00000000000000000004")
	require.NoError(t, err)
	_, err = metastore.Put(ctx, store, "tenant/refs/s/00000000000000000005", kv.Value, 0)
	require.NoError(t, err)
	_, err = metastore.Put(ctx, store, "tenant/refs/s/00000000000000000006", []byte("{not json"), 0)
	require.NoError(t, err)
	var errs []error
	for _, err := range x.Refs(ctx, stream) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	require.Len(t, errs, 2)
	for _, err := range errs {
		var re *metastore.RecordError
		require.ErrorAs(t, err, &re)
	}
	_, err = x.Next(ctx, stream)
	require.Error(t, err)
}
