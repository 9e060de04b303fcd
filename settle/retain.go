package settle

import (
	"context"
	"errors"
	"fmt"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/metastore"
)

// ErrBelowRetention: an offset lies below its stream's retention point; its
// records are gone. The error is a *TrimmedError.
var ErrBelowRetention = errkind.New(cutline.ErrTrimmed, "settle: offset below the stream's retention point")

// TrimmedError names an offset below its stream's retention point, and
// where the stream now starts.
type TrimmedError struct {
	Stream string
	Offset uint64
	Start  uint64
}

func (e *TrimmedError) Error() string {
	return fmt.Sprintf("settle: stream %s offset %d is below its retention point: the stream now starts at %d", e.Stream, e.Offset, e.Start)
}

func (e *TrimmedError) Unwrap() error { return ErrBelowRetention }

const startKind, startFormat = "refstart", 1

// refStart is a stream's retention point, refstart/<stream>: offsets
// below Start are no longer served.
type refStart struct {
	metastore.RecordHeader
	Stream string `json:"stream"`
	Start  uint64 `json:"start"`
}

func (x *RefIndex) startKey(stream string) string { return x.root + "refstart/" + stream }

// start reads stream's retention point and its revision (0, 0 when it
// has none).
func (x *RefIndex) start(ctx context.Context, stream string) (uint64, int64, error) {
	kv, err := x.store.Get(ctx, x.startKey(stream))
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		return 0, 0, nil
	case err != nil:
		return 0, 0, fmt.Errorf("settle retention point of %s: %w", stream, err)
	}
	return x.startOf(stream, metastore.ReadResult{KV: kv, Found: true})
}

// startOf decodes the read of stream's retention point: the point and
// its revision (0, 0 when it has none).
func (x *RefIndex) startOf(stream string, r metastore.ReadResult) (uint64, int64, error) {
	if !r.Found {
		return 0, 0, nil
	}
	key := x.startKey(stream)
	var st refStart
	if err := metastore.DecodeRecord(key, r.KV.Value, startKind, startFormat, &st); err != nil {
		return 0, 0, err
	}
	if st.Stream != stream {
		return 0, 0, &metastore.RecordError{Key: key, Kind: startKind, Reason: fmt.Sprintf("claims stream %q", st.Stream)}
	}
	return st.Start, r.KV.Revision, nil
}

// Start returns the stream's retention point: its first offset still
// served (0 until Retain moved it).
func (x *RefIndex) Start(ctx context.Context, stream string) (uint64, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return 0, err
	}
	s, _, err := x.start(ctx, stream)
	return s, err
}

// RetainReport describes one Retain call.
type RetainReport struct {
	Stream string
	// Start is the stream's retention point after the call.
	Start uint64
	// PagesDeleted counts the ref pages that held only offsets below it.
	PagesDeleted int
	// By names the limit of a RetainPolicy that set Start (ByAge,
	// ByBytes or ByRecords); "" when the call did not move it.
	By string
}

// Retain moves stream's retention point up to offset, which may not pass
// the stream's coverage (Next), and deletes the ref pages that hold only
// offsets below it; the stream's last page always stays, since it says
// where the stream goes on. The point only moves up: a lower offset
// deletes nothing more. Reads below it fail with a *TrimmedError. It is
// idempotent, and a crash between the two steps leaves pages that the
// next Retain deletes. It costs two reads, a list of the stream's pages,
// a write, and a transaction per MaxTxnOps pages deleted.
//
// The flights those refs pointed into are not deleted here: a flight
// bundles records of many streams. Trim an epoch's flights below the
// lowest slot any retained ref needs (Needed, Settler.TrimUnneeded).
func (x *RefIndex) Retain(ctx context.Context, stream string, offset uint64) (RetainReport, error) {
	rep := RetainReport{Stream: stream}
	if err := epoch.ValidateName("stream", stream); err != nil {
		return rep, err
	}
	h, err := x.readHead(ctx, stream)
	if err != nil {
		return rep, err
	}
	if offset > h.page.Next {
		return rep, &cutline.ConfigError{Field: "offset", Value: offset, Reason: fmt.Sprintf("past the coverage of stream %s, which ends at %d", stream, h.page.Next)}
	}
	start, rev, err := x.start(ctx, stream)
	if err != nil {
		return rep, err
	}
	if offset > start {
		v, err := metastore.EncodeRecord(&refStart{RecordHeader: metastore.RecordHeader{Kind: startKind, Format: startFormat}, Stream: stream, Start: offset})
		if err != nil {
			return rep, err
		}
		if _, err := metastore.Put(ctx, x.store, x.startKey(stream), v, rev); err != nil {
			return rep, fmt.Errorf("settle retain %s at %d: %w", stream, offset, err)
		}
		start = offset
	}
	rep.Start = start
	kvs, _, err := x.store.List(ctx, x.pagePrefix(stream))
	if err != nil {
		return rep, fmt.Errorf("settle retain %s: %w", stream, err)
	}
	var drop []metastore.KV
	for i, kv := range kvs {
		if i == len(kvs)-1 {
			break
		}
		pg, err := x.decodePage(kv, stream)
		if err != nil {
			return rep, err
		}
		if pg.Next > start {
			break
		}
		drop = append(drop, kv)
	}
	for len(drop) > 0 {
		n := min(len(drop), MaxTxnOps)
		var t metastore.Txn
		for _, kv := range drop[:n] {
			t.If = append(t.If, metastore.Compare{Key: kv.Key, Revision: kv.Revision})
			t.Then = append(t.Then, metastore.Op{Key: kv.Key, Delete: true})
		}
		if _, err := x.store.Txn(ctx, t); err != nil {
			return rep, fmt.Errorf("settle retain %s: delete pages below %d: %w", stream, start, err)
		}
		rep.PagesDeleted += n
		drop = drop[n:]
	}
	return rep, nil
}

// Needed returns the lowest slot of star's epoch ep that a retained ref
// still points into (ok false when none does): the epoch's flights below
// it may be trimmed. Refs whose bytes compaction moved into a segment
// need no flight. It lists every page and retention point of the
// index, a read that grows with the index (about one key per PageSpans
// spans of every stream): run it as maintenance, not per request.
func (x *RefIndex) Needed(ctx context.Context, star string, ep uint64) (slot uint64, ok bool, err error) {
	if err := epoch.ValidateName("star", star); err != nil {
		return 0, false, err
	}
	starts := map[string]uint64{}
	skvs, _, err := x.store.List(ctx, x.root+"refstart/")
	if err != nil {
		return 0, false, fmt.Errorf("settle needed %s/%d: %w", star, ep, err)
	}
	for _, kv := range skvs {
		var st refStart
		if err := metastore.DecodeRecord(kv.Key, kv.Value, startKind, startFormat, &st); err != nil {
			return 0, false, err
		}
		if kv.Key != x.startKey(st.Stream) {
			return 0, false, &metastore.RecordError{Key: kv.Key, Kind: startKind, Reason: fmt.Sprintf("claims stream %q", st.Stream)}
		}
		starts[st.Stream] = st.Start
	}
	kvs, _, err := x.store.List(ctx, x.root+"refpages/")
	if err != nil {
		return 0, false, fmt.Errorf("settle needed %s/%d: %w", star, ep, err)
	}
	for _, kv := range kvs {
		var pg refPage
		if err := metastore.DecodeRecord(kv.Key, kv.Value, pageKind, pageFormat, &pg); err != nil {
			return 0, false, err
		}
		if pg.Star != star || pg.Epoch != ep || pg.Segment != "" {
			continue // a page of segments needs no flight
		}
		if pg, err = x.decodePage(kv, pg.Stream); err != nil {
			return 0, false, err
		}
		for _, r := range pg.refs() {
			if r.Offset+r.Count > starts[pg.Stream] && (!ok || r.Slot < slot) {
				slot, ok = r.Slot, true
			}
		}
	}
	return slot, ok, nil
}
