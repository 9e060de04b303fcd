package settletest

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/memblob"
)

// Env is shared storage: a cutlinetest.Env over one in-memory metastore
// and K zones. Each zone is a backend bucket (Raw: mem or fs) wrapped by
// fault injection (Zones). Every party (a writer, a successor, a crashing
// incarnation) sees the storage through its own view (NewParty).
type Env struct {
	*cutlinetest.Env
	// Keys names the objects of the epochs Constants mints.
	Keys wire.Keys
}

// NewMem makes k in-memory zones named a, b, c…
func NewMem(t testing.TB, k int) *Env {
	raw := make([]objstore.Bucket, k)
	for i := range raw {
		raw[i] = memblob.New(string(rune('a' + i)))
	}
	return NewOn(t, raw, fault.Options{})
}

// NewFS makes k filesystem zones named a, b, c… under a temporary
// directory.
func NewFS(t testing.TB, k int) *Env {
	dir := t.TempDir()
	raw := make([]objstore.Bucket, k)
	for i := range raw {
		name := string(rune('a' + i))
		b, err := fs.New(filepath.Join(dir, name), fs.Options{Name: name, NoSync: true, CreateRoot: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		raw[i] = b
	}
	return NewOn(t, raw, fault.Options{})
}

// NewOn wraps the backend buckets raw in fault injection fo (zone i
// seeded fo.Seed+i+1).
func NewOn(t testing.TB, raw []objstore.Bucket, fo fault.Options) *Env {
	ce := cutlinetest.New(t, memstore.New(memstore.Options{}), raw, cutlinetest.Options{Fault: fo})
	return &Env{Env: ce, Keys: wire.Keys{Prefix: "chains"}}
}

// Backend is one of the backends the main scenarios run on.
type Backend struct {
	Name string
	New  func(t testing.TB, k int) *Env
}

// Backends are mem and fs.
var Backends = []Backend{{"mem", NewMem}, {"fs", NewFS}}

// FenceFast keeps a fencer's undecided backoff short (synctest time).
var FenceFast = fence.Options{Backoff: clock.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond}}

// On is the cutlinetest.Env failing t (a subtest's or a bubble's): its
// VerifyEpoch checks an epoch as it lies in storage (the README's
// guarantees 2–4), its State and States read the zones directly.
func (e *Env) On(t testing.TB) *cutlinetest.Env {
	c := *e.Env
	c.T = t
	return &c
}

// Key is the object key of a slot.
func (e *Env) Key(star string, ep, slot uint64) string { return e.Keys.Slot(star, ep, slot) }

// PutFlight places a flight directly in zone's backend.
func (e *Env) PutFlight(zone int, star string, ep, slot uint64, payload []byte) {
	e.T.Helper()
	require.NoError(e.T, e.Raw[zone].Create(context.Background(), e.Key(star, ep, slot), wire.EncodeFlight(star, ep, slot, payload)))
}

// PutPoison places poison directly in zone's backend, unless the slot is
// taken already.
func (e *Env) PutPoison(zone int, star string, ep, slot uint64) {
	e.T.Helper()
	err := e.Raw[zone].Create(context.Background(), e.Key(star, ep, slot), wire.EncodePoison(star, ep, slot, "test"))
	if !errors.Is(err, objstore.ErrExists) {
		require.NoError(e.T, err)
	}
}
