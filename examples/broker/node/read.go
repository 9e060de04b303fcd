package node

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// records returns a pull over stream's records from offset from on, to
// the end of its coverage, from segments and flights alike
// (settle.StreamReader), each checked against the ref that named it.
// Below the stream's retention point, next fails with a
// *settle.TrimmedError.
func (n *Node) records(ctx context.Context, stream string, from uint64) (next func() (Record, settle.Ref, error), stop func()) {
	pull, stop := iter.Pull2(n.chunks.Read(ctx, stream, from))
	next = func() (Record, settle.Ref, error) {
		c, err, ok := pull()
		switch {
		case !ok:
			return Record{}, settle.Ref{}, fmt.Errorf("stream %s: its coverage ended: %w", stream, metastore.ErrNotFound)
		case err != nil:
			return Record{}, settle.Ref{}, err
		case c.Count != 1:
			return Record{}, settle.Ref{}, fmt.Errorf("ref %s/%d covers %d records; this broker writes one per flight", stream, c.Offset, c.Count)
		}
		r, err := decodeRecord(c.Data)
		if err != nil {
			return Record{}, settle.Ref{}, err
		}
		if r.Stream != stream || r.Offset != c.Offset {
			return Record{}, settle.Ref{}, fmt.Errorf("the ref at %s/%d (%s/%v) holds %s offset %d", stream, c.Offset, c.Star, c.Position(), r.Stream, r.Offset)
		}
		return r, c.Ref, nil
	}
	return next, stop
}

// readRecord reads the record at offset off of stream, and its ref.
func (n *Node) readRecord(ctx context.Context, stream string, off uint64) (Record, settle.Ref, error) {
	next, stop := n.records(ctx, stream, off)
	defer stop()
	r, ref, err := next()
	if err == nil && r.Offset != off {
		err = fmt.Errorf("read %s/%d: got offset %d", stream, off, r.Offset)
	}
	return r, ref, err
}

// Consumed is one record of a read's answer.
type Consumed struct {
	Offset uint64 `json:"offset"`
	Data   []byte `json:"data"`
}

// planRead returns the extents of the records a read of stream answers
// with (up to limit from offset from on, as many as fit in maxBytes of
// answer, one at least; their sizes are known from the refs), and where
// the stream's coverage ends. A node that holds the stream absorbs
// first, so that what it acknowledged is readable.
func (n *Node) planRead(ctx context.Context, stream string, from uint64, limit int, maxBytes int64) ([]settle.Extent, uint64, error) {
	if h := n.Current(); h != nil {
		if _, err := h.Star.Next(stream); err == nil {
			if err := h.Star.Absorb(ctx); err != nil {
				n.log.Warn("absorb before a read", "stream", stream, "err", err)
			}
		}
	}
	next, err := n.refs.Next(ctx, stream)
	if err != nil || from >= next {
		// At or past the end, which the retention point never passes.
		return nil, next, err
	}
	var out []settle.Extent
	var used int64
	for e, err := range n.refs.Extents(ctx, stream, from) {
		if err != nil {
			return nil, 0, err
		}
		if e.End < e.Start {
			return nil, 0, fmt.Errorf("ref %s/%d: bytes [%d, %d)", stream, e.Offset, e.Start, e.End)
		}
		size := answerBytes(e.End - e.Start)
		if len(out) > 0 && used+size > maxBytes {
			break
		}
		used += size
		out = append(out, e)
		if len(out) == limit || e.Offset+e.Count >= next {
			break
		}
	}
	return out, next, nil
}

// streamInfo describes one stream for the listing.
type streamInfo struct {
	Stream string `json:"stream"`
	// Holder holds the stream's lease; Writer, Epoch and Tenure are the
	// last-writer record's; EpochState and Cut (once fenced) that epoch's.
	Holder     string  `json:"holder,omitempty"`
	Writer     string  `json:"writer,omitempty"`
	Epoch      uint64  `json:"epoch,omitempty"`
	Tenure     uint64  `json:"tenure,omitempty"`
	EpochState string  `json:"epoch_state,omitempty"`
	Cut        *uint64 `json:"cut,omitempty"`
	// Start is the stream's retention point, Next its first offset not
	// covered; Released the reason of a standing clean-release mark.
	Start    uint64 `json:"start"`
	Next     uint64 `json:"next"`
	Released string `json:"released,omitempty"`
}

// streams lists the streams ever opened under the root whose names
// follow after, limit at most, in name order, and reports whether more
// follow. One listing gives every stream's keys; the page bounds the
// reads of each stream's state.
func (n *Node) streams(ctx context.Context, after string, limit int) ([]streamInfo, bool, error) {
	ids, err := n.streamIDs(ctx, after)
	if err != nil {
		return nil, false, err
	}
	out := []streamInfo{}
	for _, id := range ids[:min(limit, len(ids))] {
		info, err := n.streamInfo(ctx, id)
		if err != nil {
			return nil, false, err
		}
		out = append(out, info)
	}
	return out, len(ids) > limit, nil
}

// streamIDs lists the streams ever opened under the root whose names
// follow after, in name order.
func (n *Node) streamIDs(ctx context.Context, after string) ([]string, error) {
	prefix := n.Config.Root + "streams/"
	kvs, _, err := n.Config.Store.List(ctx, prefix)
	if err != nil {
		return nil, err
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
	return ids, nil
}

// streamInfo reads one stream's state for the listing.
func (n *Node) streamInfo(ctx context.Context, id string) (streamInfo, error) {
	st, err := lease.Inspect(ctx, n.Config.Store, n.Config.Root, id)
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
			info.Cut = &rec.Cut
		}
	}
	if st.Mark != nil {
		info.Released = string(st.Mark.Reason)
	}
	if info.Start, err = n.refs.Start(ctx, id); err != nil {
		return streamInfo{}, err
	}
	if info.Next, err = n.refs.Next(ctx, id); err != nil {
		return streamInfo{}, err
	}
	return info, nil
}

// holderName is the name of the node holding the domain's grant, as the
// controller's durable state says ("" while none does).
func (n *Node) holderName(ctx context.Context) string {
	st, err := authority.Read(ctx, n.Config.Store, n.Config.Root, n.Config.Domain)
	if err != nil || (st.Phase != authority.Granted && st.Phase != authority.Handoff) {
		return ""
	}
	return st.Holder
}
