package node

import (
	"context"
	"fmt"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/settle"
)

// recordOf decodes chunk c of stream, checked against the ref that
// named it.
func recordOf(stream string, c settle.Chunk) (Record, error) {
	if c.Count != 1 {
		return Record{}, fmt.Errorf("ref %s/%d covers %d records; this broker writes one per flight", stream, c.Offset, c.Count)
	}
	r, err := decodeRecord(c.Data)
	if err == nil && (r.Stream != stream || r.Offset != c.Offset) {
		err = fmt.Errorf("the ref at %s/%d (%s/%v) holds %s offset %d", stream, c.Offset, c.Star, c.Position(), r.Stream, r.Offset)
	}
	return r, err
}

// Consumed is one record of a read's answer.
type Consumed struct {
	Offset uint64 `json:"offset"`
	Data   []byte `json:"data"`
}

// planRead plans the page of stream a read answers with (up to limit
// records from offset from on, as many as fit in maxBytes of answer, one
// at least). A node that holds the stream absorbs first, so that what it
// acknowledged is readable.
func (n *Node) planRead(ctx context.Context, stream string, from uint64, limit int, maxBytes int64) (settle.Page, error) {
	if h := n.Current(); h != nil {
		if _, err := h.Star.Next(stream); err == nil {
			if err := h.Star.Absorb(ctx); err != nil {
				n.log.Warn("absorb before a read", "stream", stream, "err", err)
			}
		}
	}
	return n.refs.Page(ctx, stream, from, settle.PageLimits{MaxRecords: uint64(limit), MaxBytes: maxBytes,
		Cost: func(e settle.Extent) int64 { return answerBytes(e.End - e.Start) }})
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
	ids, err := lease.Streams(ctx, n.Config.Store, n.Config.Root, after)
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
