// Package synth is a synthetic epoch for benchmarks of the fence: an epoch
// of any number of slots (a million, say) that is never stored. Its
// buckets encode each flight when it is read, keep whatever is created
// (poison, repaired copies) in an overlay, and count their requests.
package synth

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/objstore"
)

// Chain describes an epoch of N slots of Star: every slot below N holds
// its flight in every bucket, except the ragged Tail, whose rows say
// which buckets hold the flight ('F') and which are empty ('E').
type Chain struct {
	Star    string
	N       uint64
	Tail    map[uint64]string
	Payload []byte
	// Grow, when set, plays a writer that never stops: every read request
	// extends the chain by Grow committed slots (created objects, such as
	// poison, keep their slots).
	Grow uint64
	end  atomic.Uint64 // the growth so far
}

// End is where the chain ends now: N plus its growth.
func (c *Chain) End() uint64 { return c.N + c.end.Load() }

// RaggedTail is a pipelined writer's tail, for K=3: committed, half
// written, a hole, and a straggler past the hole. The cut is n−2.
func RaggedTail(n uint64) map[uint64]string {
	return map[uint64]string{n - 4: "F F E", n - 3: "F E E", n - 2: "E E E", n - 1: "F E E"}
}

// Bucket is bucket idx of a Chain.
type Bucket struct {
	c    *Chain
	idx  int
	name string

	mu      sync.Mutex
	overlay map[string][]byte

	reads, creates atomic.Int64
}

var _ objstore.Bucket = (*Bucket)(nil)

// NewZones returns the k buckets of c, named a, b, c…
func NewZones(c *Chain, k int) []*Bucket {
	out := make([]*Bucket, k)
	for i := range out {
		out[i] = &Bucket{c: c, idx: i, name: string(rune('a' + i)), overlay: map[string][]byte{}}
	}
	return out
}

// Name implements objstore.Bucket.
func (b *Bucket) Name() string { return b.name }

// Reads and Creates count the requests the bucket answered.
func (b *Bucket) Reads() int64   { return b.reads.Load() }
func (b *Bucket) Creates() int64 { return b.creates.Load() }

// parse splits a slot key, <prefix>/<star>/<epoch>/<slot>.
func (b *Bucket) parse(key string) (ep, slot uint64, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) < 3 || parts[len(parts)-3] != b.c.Star {
		return 0, 0, false
	}
	ep, err1 := strconv.ParseUint(parts[len(parts)-2], 10, 64)
	slot, err2 := strconv.ParseUint(parts[len(parts)-1], 10, 64)
	return ep, slot, err1 == nil && err2 == nil
}

// object returns what the bucket holds at key.
func (b *Bucket) object(key string) ([]byte, bool) {
	b.mu.Lock()
	d, ok := b.overlay[key]
	b.mu.Unlock()
	if ok {
		return d, true
	}
	ep, slot, ok := b.parse(key)
	if !ok || slot >= b.c.End() {
		return nil, false
	}
	if row, ok := b.c.Tail[slot]; ok && strings.Fields(row)[b.idx] != "F" {
		return nil, false
	}
	return wire.EncodeFlight(b.c.Star, ep, slot, b.c.Payload), true
}

func (b *Bucket) opErr(op, key string, err error) error {
	return &objstore.OpError{Op: op, Bucket: b.name, Key: key, Err: err}
}

// Create implements objstore.Bucket: create-only, into the overlay.
func (b *Bucket) Create(ctx context.Context, key string, data []byte) error {
	b.creates.Add(1)
	if _, ok := b.object(key); ok {
		return b.opErr("create", key, objstore.ErrExists)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.overlay[key]; ok {
		return b.opErr("create", key, objstore.ErrExists)
	}
	b.overlay[key] = append([]byte(nil), data...)
	return nil
}

// Get implements objstore.Bucket.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	b.reads.Add(1)
	b.c.end.Add(b.c.Grow)
	d, ok := b.object(key)
	if !ok {
		return nil, b.opErr("get", key, objstore.ErrNotFound)
	}
	return append([]byte(nil), d...), nil
}

// GetRange implements objstore.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b.reads.Add(1)
	b.c.end.Add(b.c.Grow)
	d, ok := b.object(key)
	if !ok {
		return nil, b.opErr("getrange", key, objstore.ErrNotFound)
	}
	if off >= int64(len(d)) {
		return []byte{}, nil
	}
	return append([]byte(nil), d[off:off+min(n, int64(len(d))-off)]...), nil
}

// Delete implements objstore.Bucket: only created objects go.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.overlay, key)
	return nil
}

// List is not used by the fencer; the synthetic chain lists nothing.
func (b *Bucket) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	return nil, nil
}
