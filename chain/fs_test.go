//go:build unix

package chain_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
)

// The writer and reader on the filesystem backend: two epochs, a zone down
// during the second, a poisoned slot ending the first.
func TestFilesystemBackend(t *testing.T) {
	ctx := bounded(t)
	dir := t.TempDir()
	var buckets []objstore.Bucket
	for i := range 3 {
		name := fmt.Sprintf("zone-%c", 'a'+i)
		b, err := fs.New(filepath.Join(dir, name), fs.Options{Name: name, NoSync: true, CreateRoot: true})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		buckets = append(buckets, b)
	}
	env := cutlinetest.New(t, memstore.New(memstore.Options{}), buckets, cutlinetest.Options{})
	p := env.Party("test")
	c := env.Constants(2, 8)
	opts := chain.WriterOptions{Backoff: clock.Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}}

	// Epoch 1: slot 12 is poisoned in two zones; the writer halts there.
	e1 := p.Mint(star, c)
	for _, i := range []int{0, 2} {
		env.Put(i, e1, 12, cutlinetest.Poison)
	}
	w := p.Writer(e1, opts)
	var want [][]byte
	for i := 0; ; i++ {
		require.Less(t, i, 1000, "the writer never halted at the poisoned slot 12")
		_, err := w.Append(ctx, payload(i))
		if err != nil {
			require.ErrorIs(t, err, chain.ErrFenced)
			break
		}
		want = append(want, payload(i))
	}
	require.NoError(t, w.Close(ctx))
	require.Len(t, want, 12)
	_, err := p.Minter.Publish(ctx, star, e1.Epoch, w.Released())
	require.NoError(t, err)

	// Epoch 2: zone b is down the whole time.
	env.Zones[1].SetDown(true)
	w = p.Writer(p.Mint(star, c), opts)
	for i := range 30 {
		_, err := w.Append(ctx, payload(100+i))
		require.NoError(t, err)
		want = append(want, payload(100+i))
	}
	require.NoError(t, w.Close(ctx))

	var got [][]byte
	for f, err := range p.Reader.Flights(ctx, star, chain.Position{}) {
		require.NoError(t, err)
		got = append(got, f.Payload)
	}
	require.Equal(t, want, got)
}
