//go:build unix

package chain_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	memstore "github.com/cutline/cutline/metastore/mem"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/fs"
)

// The writer and reader on the filesystem backend: two epochs, a zone down
// during the second, a poisoned slot ending the first.
func TestFilesystemBackend(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var zones []*fault.Bucket
	var buckets []objstore.Bucket
	for i := range 3 {
		name := fmt.Sprintf("zone-%c", 'a'+i)
		b, err := fs.New(filepath.Join(dir, name), fs.Options{Name: name, NoSync: true, CreateRoot: true})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		fb := fault.Wrap(b, fault.Options{})
		zones = append(zones, fb)
		buckets = append(buckets, fb)
	}
	m, err := epoch.NewMinter(memstore.New(memstore.Options{}), epoch.Options{})
	require.NoError(t, err)
	keys := wire.Keys{Prefix: "chains"}
	c := epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: 8, Prefix: keys.Prefix}
	opts := chain.WriterOptions{Backoff: clock.Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}}

	// Epoch 1: slot 12 is poisoned in two zones; the writer halts there.
	e1, err := m.Mint(ctx, star, c)
	require.NoError(t, err)
	for _, i := range []int{0, 2} {
		require.NoError(t, zones[i].Inner().Create(ctx, keys.Slot(star, e1.Epoch, 12), wire.EncodePoison(star, e1.Epoch, 12, "fencer")))
	}
	w, err := chain.NewWriter(e1, chain.MustZones(buckets...), opts)
	require.NoError(t, err)
	var want [][]byte
	for i := 0; ; i++ {
		_, err := w.Append(ctx, payload(i))
		if err != nil {
			require.ErrorIs(t, err, chain.ErrFenced)
			break
		}
		want = append(want, payload(i))
	}
	require.NoError(t, w.Close(ctx))
	require.Len(t, want, 12)
	_, err = m.Publish(ctx, star, e1.Epoch, w.Released())
	require.NoError(t, err)

	// Epoch 2: zone b is down the whole time.
	zones[1].SetDown(true)
	e2, err := m.Mint(ctx, star, c)
	require.NoError(t, err)
	w, err = chain.NewWriter(e2, chain.MustZones(buckets...), opts)
	require.NoError(t, err)
	for i := range 30 {
		_, err := w.Append(ctx, payload(100+i))
		require.NoError(t, err)
		want = append(want, payload(100+i))
	}
	require.NoError(t, w.Close(ctx))

	r, err := chain.NewReader(m, chain.MustZones(buckets...), chain.ReaderOptions{})
	require.NoError(t, err)
	var got [][]byte
	for f, err := range r.Flights(ctx, star, chain.Position{}) {
		require.NoError(t, err)
		got = append(got, f.Payload)
	}
	require.Equal(t, want, got)
}
