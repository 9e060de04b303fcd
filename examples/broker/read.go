package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/lease/authority"
	"github.com/cutline/cutline/settle"
)

// readRef reads the record a ref names, and checks it is the one the ref
// says.
func (n *node) readRef(ctx context.Context, stream string, ref settle.Ref) (record, error) {
	if ref.Count != 1 {
		return record{}, fmt.Errorf("ref %s/%d covers %d records; this broker writes one per flight", stream, ref.Offset, ref.Count)
	}
	payload, err := n.reader.Read(ctx, ref.Star, ref.Position())
	if err != nil {
		return record{}, err
	}
	if ref.End > uint64(len(payload)) || ref.Start > ref.End {
		return record{}, fmt.Errorf("ref %s/%d: bytes [%d, %d) of a %d-byte flight", stream, ref.Offset, ref.Start, ref.End, len(payload))
	}
	r, err := decodeRecord(payload[ref.Start:ref.End])
	if err != nil {
		return record{}, err
	}
	if r.Stream != stream || r.Offset != ref.Offset {
		return record{}, fmt.Errorf("the flight at %s/%v holds %s offset %d, not %s offset %d", ref.Star, ref.Position(), r.Stream, r.Offset, stream, ref.Offset)
	}
	return r, nil
}

// consumed is one record read back.
type consumed struct {
	Offset uint64 `json:"offset"`
	Data   []byte `json:"data"`
}

// planRead returns the refs of the records a read of stream answers with:
// up to limit, from offset from on, as many as fit in maxBytes of answer
// (one at least), and where the stream's coverage ends. A node that holds
// the stream absorbs first, so that what it acknowledged is readable.
// What each record takes is known from its ref before it is read.
func (n *node) planRead(ctx context.Context, stream string, from uint64, limit int, maxBytes int64) ([]settle.Ref, uint64, error) {
	h := n.current()
	if h != nil {
		if _, err := h.star.Next(stream); err == nil {
			if err := h.star.Absorb(ctx); err != nil {
				n.log.Warn("absorb before a read", "stream", stream, "err", err)
			}
		}
	}
	next, err := n.refs.Next(ctx, stream)
	if err != nil {
		return nil, 0, err
	}
	var refs []settle.Ref
	used := int64(0)
	for off := from; off < next && len(refs) < limit; off++ {
		ref, err := n.refs.Lookup(ctx, stream, off)
		if err != nil {
			return nil, 0, err
		}
		if ref.End < ref.Start {
			return nil, 0, fmt.Errorf("ref %s/%d: bytes [%d, %d)", stream, off, ref.Start, ref.End)
		}
		size := answerBytes(ref.End - ref.Start)
		if len(refs) > 0 && used+size > maxBytes {
			break
		}
		used += size
		refs = append(refs, ref)
	}
	return refs, next, nil
}

// streamInfo describes one stream for the listing.
type streamInfo struct {
	Stream string `json:"stream"`
	// Holder is the star holding the stream's lease ("" when none).
	Holder string `json:"holder,omitempty"`
	// Writer, Epoch and Tenure are the last-writer record's; EpochState
	// and Cut (once fenced) that epoch's.
	Writer     string  `json:"writer,omitempty"`
	Epoch      uint64  `json:"epoch,omitempty"`
	Tenure     uint64  `json:"tenure,omitempty"`
	EpochState string  `json:"epoch_state,omitempty"`
	Cut        *uint64 `json:"cut,omitempty"`
	// Next is the stream's first offset not covered.
	Next uint64 `json:"next"`
	// Released is the reason of a standing clean-release mark.
	Released string `json:"released,omitempty"`
}

// streams lists the streams ever opened under the root whose names
// follow after, limit at most, in name order, and reports whether more
// follow. The metastore lists the keys of every stream at once; the page
// bounds the reads of each stream's state.
func (n *node) streams(ctx context.Context, after string, limit int) ([]streamInfo, bool, error) {
	prefix := n.cfg.Root + "streams/"
	kvs, _, err := n.cfg.Store.List(ctx, prefix)
	if err != nil {
		return nil, false, err
	}
	var ids []string
	for _, kv := range kvs {
		// The keys of one stream are contiguous in key order.
		id, leaf, ok := strings.Cut(kv.Key[len(prefix):], "/")
		if ok && leaf != "" && id > after && (len(ids) == 0 || ids[len(ids)-1] != id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	more := len(ids) > limit
	ids = ids[:min(limit, len(ids))]
	out := []streamInfo{}
	for _, id := range ids {
		info, err := n.streamInfo(ctx, id)
		if err != nil {
			return nil, false, err
		}
		out = append(out, info)
	}
	return out, more, nil
}

// streamInfo reads one stream's state for the listing.
func (n *node) streamInfo(ctx context.Context, id string) (streamInfo, error) {
	st, err := lease.Inspect(ctx, n.cfg.Store, n.cfg.Root, id)
	if err != nil {
		return streamInfo{}, err
	}
	info := streamInfo{Stream: id, Holder: st.Holder}
	if w := st.Writer; w != nil {
		info.Writer, info.Epoch, info.Tenure = w.Star, w.Epoch, w.Tenure
		rec, err := n.minter.Get(ctx, w.Star, w.Epoch)
		if err != nil {
			return streamInfo{}, err
		}
		info.EpochState = string(rec.State)
		if rec.Fenced() {
			c := rec.Cut
			info.Cut = &c
		}
	}
	if st.Mark != nil {
		info.Released = string(st.Mark.Reason)
	}
	if info.Next, err = n.refs.Next(ctx, id); err != nil {
		return streamInfo{}, err
	}
	return info, nil
}

// holderName is the name of the node holding the domain's grant, as the
// controller's durable state says ("" while none does).
func (n *node) holderName(ctx context.Context) string {
	st, err := authority.Read(ctx, n.cfg.Store, n.cfg.Root, n.cfg.Domain)
	if err != nil || (st.Phase != authority.Granted && st.Phase != authority.Handoff) {
		return ""
	}
	return st.Holder
}
