package main

import (
	"context"
	"fmt"
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

// read reads up to limit records of stream from offset on, and returns
// them and where the stream's coverage ends. A node that holds the stream
// absorbs first, so that what it acknowledged is readable.
func (n *node) read(ctx context.Context, stream string, from uint64, limit int) ([]consumed, uint64, error) {
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
	out := []consumed{}
	for off := from; off < next && len(out) < limit; off++ {
		ref, err := n.refs.Lookup(ctx, stream, off)
		if err != nil {
			return nil, 0, err
		}
		r, err := n.readRef(ctx, stream, ref)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, consumed{Offset: off, Data: r.Data})
	}
	return out, next, nil
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

// streams lists every stream ever opened under the root.
func (n *node) streams(ctx context.Context) ([]streamInfo, error) {
	prefix := n.cfg.Root + "streams/"
	kvs, _, err := n.cfg.Store.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := []streamInfo{}
	for _, kv := range kvs {
		id, leaf, ok := strings.Cut(kv.Key[len(prefix):], "/")
		if !ok || leaf == "" || (len(out) > 0 && out[len(out)-1].Stream == id) {
			continue
		}
		st, err := lease.Inspect(ctx, n.cfg.Store, n.cfg.Root, id)
		if err != nil {
			return nil, err
		}
		info := streamInfo{Stream: id, Holder: st.Holder}
		if w := st.Writer; w != nil {
			info.Writer, info.Epoch, info.Tenure = w.Star, w.Epoch, w.Tenure
			rec, err := n.minter.Get(ctx, w.Star, w.Epoch)
			if err != nil {
				return nil, err
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
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
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
