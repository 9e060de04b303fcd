package fence

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	metamem "github.com/cutline/cutline/metastore/mem"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/mem"
)

// zone is a bucket that can be taken down: every call then fails with
// ErrUnavailable without reaching the bucket.
type zone struct {
	objstore.Bucket
	down atomic.Bool
}

func (z *zone) err(op, key string) error {
	return &objstore.OpError{Op: op, Bucket: z.Name(), Key: key, Err: objstore.Unavailable(fmt.Errorf("zone down"))}
}

func (z *zone) Create(ctx context.Context, key string, data []byte) error {
	if z.down.Load() {
		return z.err("create", key)
	}
	return z.Bucket.Create(ctx, key, data)
}

func (z *zone) Get(ctx context.Context, key string) ([]byte, error) {
	if z.down.Load() {
		return nil, z.err("get", key)
	}
	return z.Bucket.Get(ctx, key)
}

func (z *zone) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if z.down.Load() {
		return nil, z.err("getrange", key)
	}
	return z.Bucket.GetRange(ctx, key, off, n)
}

type env struct {
	t      *testing.T
	minter *epoch.Minter
	zones  []*zone
	rec    *epoch.Record
	keys   chain.Keys
}

const star = "star-a"

func newEnv(t *testing.T, k, w, window int) *env {
	t.Helper()
	m, err := epoch.NewMinter(metamem.New(metamem.Options{}), epoch.Options{})
	require.NoError(t, err)
	e := &env{t: t, minter: m, keys: chain.Keys{Prefix: "chains"}}
	var names []string
	for i := range k {
		name := string(rune('a' + i))
		e.zones = append(e.zones, &zone{Bucket: mem.New(name)})
		names = append(names, name)
	}
	e.rec, err = m.Mint(context.Background(), star, epoch.Constants{Class: "standard", Buckets: names, W: w, Window: window})
	require.NoError(t, err)
	return e
}

func (e *env) buckets() chain.Zones {
	z := chain.Zones{}
	for _, b := range e.zones {
		z[b.Name()] = b
	}
	return z
}

func (e *env) fencer(opts Options) *Fencer {
	e.t.Helper()
	opts.Keys = e.keys
	f, err := New(e.minter, e.buckets(), opts)
	require.NoError(e.t, err)
	return f
}

func payload(slot uint64) []byte { return []byte(fmt.Sprintf("payload-%d", slot)) }

// put places an object in bucket b at slot: 'F' flight, 'P' poison, 'X'
// a foreign (corrupt) object, 'M' a misplaced flight (claims another slot).
func (e *env) put(slot uint64, b int, kind byte) {
	e.t.Helper()
	var data []byte
	switch kind {
	case 'F':
		data = chain.EncodeFlight(star, e.rec.Epoch, slot, payload(slot))
	case 'P':
		data = chain.EncodePoison(star, e.rec.Epoch, slot, "earlier-fencer")
	case 'X':
		data = []byte("this is not a slot object")
	case 'M':
		data = chain.EncodeFlight(star, e.rec.Epoch, slot+1000, payload(slot))
	default:
		return
	}
	key := e.keys.Slot(star, e.rec.Epoch, slot)
	require.NoError(e.t, e.zones[b].Bucket.Create(context.Background(), key, data))
}

// layout places objects from rows like "F F E", one row per slot from 0.
func (e *env) layout(rows ...string) {
	for s, row := range rows {
		for b, c := range strings.Fields(row) {
			e.put(uint64(s), b, c[0])
		}
	}
}

// state reads slot s in every bucket (bypassing outages): a row like "F P E".
func (e *env) state(s uint64) string {
	var out []string
	for _, z := range e.zones {
		o := chain.ObserveObject(context.Background(), z.Bucket, chain.Slot{Keys: e.keys, Star: star, Epoch: e.rec.Epoch, Slot: s})
		out = append(out, map[chain.SlotState]string{chain.Empty: "E", chain.HasFlight: "F", chain.HasPoison: "P", chain.Foreign: "X"}[o.State])
	}
	return strings.Join(out, " ")
}

func (e *env) record() *epoch.Record {
	r, err := e.minter.Get(context.Background(), star, e.rec.Epoch)
	require.NoError(e.t, err)
	return r
}
