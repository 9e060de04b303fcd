package settle

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/config"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
)

// Coverage is the host's index over the chain: the refs that map what the
// host serves (stream offsets, queue positions) to chain positions. The
// coverage invariant is that refs cover every acknowledged byte.
//
// A host keeps its index current as acknowledgements arrive, and advances the
// epoch's checkpoint (epoch.Minter.Advance) past what it has covered. When a
// writer dies between an acknowledgement and the host's index update,
// settlement hands every committed flight in [checkpoint, cut) to Cover, so
// nothing acknowledged is left unreachable. Cover must therefore be
// idempotent by (star, epoch, slot): covering a flight twice changes
// nothing, and it must never make two positions cover the same host offset.
// Settlement moves no flight bytes: refs point into the flights where they
// are.
type Coverage interface {
	Cover(ctx context.Context, star string, f chain.Flight) error
}

// Errors of the RefIndex.
var (
	// ErrDoubleCover: a host offset is already covered by another chain
	// position. Two positions claiming one offset means an acknowledged
	// record would be served twice or not at all; it is never overwritten.
	// The error is a *DoubleCoverError.
	ErrDoubleCover = errors.New("settle: offset covered by another position")
	// ErrLocate: the Locator could not read a flight's payload.
	ErrLocate = errors.New("settle: cannot locate flight payload")
)

// DoubleCoverError names the offset and the two positions claiming it.
type DoubleCoverError struct {
	Stream   string
	Offset   uint64
	Existing Ref
	Offered  Ref
}

func (e *DoubleCoverError) Error() string {
	return fmt.Sprintf("settle: stream %s offset %d is covered by %s, refusing %s", e.Stream, e.Offset, e.Existing.at(), e.Offered.at())
}

func (e *DoubleCoverError) Unwrap() error { return ErrDoubleCover }

// Ref maps a run of a stream's offsets [Offset, Offset+Count) to the flight
// that holds them.
type Ref struct {
	metastore.Header
	Stream string `json:"stream"`
	Offset uint64 `json:"offset"`
	Count  uint64 `json:"count"`
	Star   string `json:"star"`
	Epoch  uint64 `json:"epoch"`
	Slot   uint64 `json:"slot"`
}

func (r Ref) at() string { return fmt.Sprintf("%s/%d/%d", r.Star, r.Epoch, r.Slot) }

// Position is the chain position the ref points at.
func (r Ref) Position() chain.Position { return chain.Position{Epoch: r.Epoch, Slot: r.Slot} }

// Locator reads from a flight's payload which stream offsets it carries:
// [offset, offset+count) of stream. It is the host's payload format.
type Locator func(payload []byte) (stream string, offset, count uint64, err error)

const refKind, refFormat = "ref", 1

// RefIndex is a ready Coverage kept in the metastore, one key per flight:
// <root>refs/<stream>/<offset, 20 digits> → the star, epoch and slot that
// hold it. Writes are create-only, so Cover is idempotent and two positions
// can never cover one offset. Hosts with their own index implement Coverage
// with the same two guarantees.
type RefIndex struct {
	store  metastore.Store
	root   string
	locate Locator
}

var _ Coverage = (*RefIndex)(nil)

// NewRefIndex returns a RefIndex under root ("" or ending in '/').
func NewRefIndex(store metastore.Store, root string, locate Locator) (*RefIndex, error) {
	if store == nil || locate == nil {
		return nil, &config.Error{Field: "store/locate", Value: nil, Reason: "required"}
	}
	if root != "" && !strings.HasSuffix(root, "/") {
		return nil, &config.Error{Field: "root", Value: fmt.Sprintf("%q", root), Reason: "must end with '/'"}
	}
	return &RefIndex{store: store, root: root, locate: locate}, nil
}

func (x *RefIndex) prefix(stream string) string { return x.root + "refs/" + stream + "/" }

func (x *RefIndex) key(stream string, offset uint64) string {
	return fmt.Sprintf("%s%020d", x.prefix(stream), offset)
}

// Cover records the ref of flight f. It succeeds when the same ref exists
// already and fails with a *DoubleCoverError when another position holds
// the offset.
func (x *RefIndex) Cover(ctx context.Context, star string, f chain.Flight) error {
	stream, offset, count, err := x.locate(f.Payload)
	if err != nil {
		return fmt.Errorf("%w: %s/%v: %w", ErrLocate, star, f.Position, err)
	}
	if err := epoch.ValidateName("stream", stream); err != nil {
		return err
	}
	if count == 0 {
		return fmt.Errorf("%w: %s/%v: empty offset run", ErrLocate, star, f.Position)
	}
	ref := Ref{Header: metastore.Header{Kind: refKind, Format: refFormat}, Stream: stream, Offset: offset, Count: count, Star: star, Epoch: f.Epoch, Slot: f.Slot}
	v, err := metastore.EncodeRecord(&ref)
	if err != nil {
		return err
	}
	key := x.key(stream, offset)
	_, err = metastore.Put(ctx, x.store, key, v, 0)
	if errors.Is(err, metastore.ErrConflict) {
		cur, gerr := x.Lookup(ctx, stream, offset)
		if gerr != nil {
			return gerr
		}
		if cur.Star == star && cur.Epoch == f.Epoch && cur.Slot == f.Slot && cur.Count == count {
			return nil
		}
		return &DoubleCoverError{Stream: stream, Offset: offset, Existing: cur, Offered: ref}
	}
	if err != nil {
		return fmt.Errorf("settle cover %s offset %d: %w", stream, offset, err)
	}
	return nil
}

// Lookup returns the ref whose run starts at offset, or an error matching
// metastore.ErrNotFound.
func (x *RefIndex) Lookup(ctx context.Context, stream string, offset uint64) (Ref, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return Ref{}, err
	}
	key := x.key(stream, offset)
	kv, err := x.store.Get(ctx, key)
	if err != nil {
		return Ref{}, fmt.Errorf("settle ref %s/%d: %w", stream, offset, err)
	}
	return decodeRef(kv, stream, offset)
}

// decodeRef decodes the ref stored at kv, which must be stream's ref at
// offset: a ref that claims other coordinates than its key, names no valid
// star or epoch, or covers no offsets (or runs past the offset space) is a
// *metastore.RecordError, never acted upon.
func decodeRef(kv metastore.KV, stream string, offset uint64) (Ref, error) {
	var r Ref
	if err := metastore.DecodeRecord(kv.Key, kv.Value, refKind, refFormat, &r); err != nil {
		return Ref{}, err
	}
	bad := func(reason string) (Ref, error) {
		return Ref{}, &metastore.RecordError{Key: kv.Key, Kind: refKind, Reason: reason}
	}
	switch {
	case r.Stream != stream || r.Offset != offset:
		return bad(fmt.Sprintf("claims stream %q offset %d", r.Stream, r.Offset))
	case epoch.ValidateName("star", r.Star) != nil:
		return bad(fmt.Sprintf("names no valid star: %q", r.Star))
	case r.Epoch == 0:
		return bad("epoch numbers start at 1")
	case r.Count == 0 || r.Offset+r.Count < r.Offset:
		return bad(fmt.Sprintf("covers %d offsets from %d", r.Count, r.Offset))
	}
	return r, nil
}

// Refs yields a stream's refs in offset order.
func (x *RefIndex) Refs(ctx context.Context, stream string) iter.Seq2[Ref, error] {
	return func(yield func(Ref, error) bool) {
		if err := epoch.ValidateName("stream", stream); err != nil {
			yield(Ref{}, err)
			return
		}
		kvs, _, err := x.store.List(ctx, x.prefix(stream))
		if err != nil {
			yield(Ref{}, fmt.Errorf("settle refs %s: %w", stream, err))
			return
		}
		for _, kv := range kvs {
			var r Ref
			n, err := strconv.ParseUint(strings.TrimPrefix(kv.Key, x.prefix(stream)), 10, 64)
			if err != nil || x.key(stream, n) != kv.Key {
				err = &metastore.RecordError{Key: kv.Key, Kind: refKind, Reason: "key is not an offset"}
			} else {
				r, err = decodeRef(kv, stream, n)
			}
			if !yield(r, err) {
				return
			}
		}
	}
}

// Next returns the first offset of stream that no ref covers past the
// highest ref: where the stream's next append goes.
func (x *RefIndex) Next(ctx context.Context, stream string) (uint64, error) {
	var next uint64
	for r, err := range x.Refs(ctx, stream) {
		if err != nil {
			return 0, err
		}
		next = max(next, r.Offset+r.Count)
	}
	return next, nil
}
