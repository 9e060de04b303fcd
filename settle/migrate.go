package settle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/metastore"
)

// ErrIndexFormat: a stream is indexed in a format this version does not
// serve (format 1, one key per span). Migrate converts it. The error is a
// *FormatError.
var ErrIndexFormat = errkind.New(cutline.ErrCorrupt, "settle: the stream is indexed in another format")

// FormatError names a stream indexed in another format, and the way out.
type FormatError struct {
	Stream string
	Format int
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("settle: stream %s is indexed in format %d, this version serves format %d: migrate the index first (RefIndex.Migrate, or `cutline index-migrate`)",
		e.Stream, e.Format, IndexFormat)
}

func (e *FormatError) Unwrap() error { return ErrIndexFormat }

// Format 1's keys and kinds: one key per span, and a head per stream.
const (
	refKind, v1RefFormat   = "ref", 1
	v1HeadKind, v1HeadForm = "refhead", 1
)

func (x *RefIndex) v1Prefix(stream string) string  { return x.root + "refs/" + stream + "/" }
func (x *RefIndex) v1HeadKey(stream string) string { return x.root + "refheads/" + stream }

// checkFormat tells a stream with no page from one indexed in format 1:
// one read, made only when a stream has no page, and only while the index
// holds format-1 keys at all (see lookForV1).
func (x *RefIndex) checkFormat(ctx context.Context, stream string) error {
	none, err := x.lookForV1(ctx)
	if err != nil || none {
		return err
	}
	_, err = x.store.Get(ctx, x.v1HeadKey(stream))
	switch {
	case err == nil:
		return &FormatError{Stream: stream, Format: 1}
	case errors.Is(err, metastore.ErrNotFound):
		return nil
	}
	return fmt.Errorf("settle ref head %s: %w", stream, err)
}

// lookForV1 tells whether the index holds no format-1 key at all: looked
// for once (one read), then remembered. A release that writes format 1
// must not run beside this one.
func (x *RefIndex) lookForV1(ctx context.Context) (none bool, err error) {
	// One look at a time, waited for on a channel so that ctx ends the
	// wait.
	select {
	case x.v1Look <- struct{}{}:
		defer func() { <-x.v1Look }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	x.mu.Lock()
	none = x.noV1
	x.mu.Unlock()
	if none {
		return true, nil
	}
	prefix := x.root + "refheads/"
	_, err = metastore.Floor(ctx, x.store, prefix, prefix+"\U0010FFFF")
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		x.mu.Lock()
		x.noV1 = true
		x.mu.Unlock()
		return true, nil
	case err != nil:
		return false, fmt.Errorf("settle index format: %w", err)
	}
	return false, nil
}

// MigrateReport describes the migration of one stream.
type MigrateReport struct {
	Stream string
	// Refs is how many format-1 refs the stream had; Pages how many
	// pages hold them now.
	Refs, Pages int
}

// Migrate converts stream's refs from format 1 to pages, then deletes the
// format-1 keys. Run it while no star writes the stream (the tool runs it
// with every star stopped). It is idempotent: a migration that crashed
// half-way is finished by running it again, and pages already written
// are compared, never overwritten. A stream with no format-1 head is left
// as it is. Its memory and reads grow with the stream's refs.
func (x *RefIndex) Migrate(ctx context.Context, stream string) (MigrateReport, error) {
	rep := MigrateReport{Stream: stream}
	if err := epoch.ValidateName("stream", stream); err != nil {
		return rep, err
	}
	hkv, err := x.store.Get(ctx, x.v1HeadKey(stream))
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		return rep, nil
	case err != nil:
		return rep, fmt.Errorf("settle migrate %s: %w", stream, err)
	}
	var h struct {
		metastore.RecordHeader
		Stream string `json:"stream"`
		Next   uint64 `json:"next"`
	}
	if err := metastore.DecodeRecord(hkv.Key, hkv.Value, v1HeadKind, v1HeadForm, &h); err != nil {
		return rep, err
	}
	if h.Stream != stream {
		return rep, &metastore.RecordError{Key: hkv.Key, Kind: v1HeadKind, Reason: fmt.Sprintf("claims stream %q", h.Stream)}
	}
	kvs, _, err := x.store.List(ctx, x.v1Prefix(stream))
	if err != nil {
		return rep, fmt.Errorf("settle migrate %s: %w", stream, err)
	}
	// The format-1 keys are deleted only once every page is written: a
	// last page that reaches the head's offset means a migration that
	// crashed while deleting them, and what is left is deleted.
	if last, err := metastore.Floor(ctx, x.store, x.pagePrefix(stream), x.lastPageKey(stream)); err == nil {
		pg, err := x.decodePage(last, stream)
		if err != nil {
			return rep, err
		}
		if pg.Next == h.Next {
			return rep, x.deleteV1(ctx, stream, kvs, hkv.Key)
		}
	} else if !errors.Is(err, metastore.ErrNotFound) {
		return rep, fmt.Errorf("settle migrate %s: %w", stream, err)
	}
	rep.Refs = len(kvs)
	var pages []refPage
	next := uint64(0)
	for _, kv := range kvs {
		r, err := x.decodeV1Ref(kv, stream)
		if err != nil {
			return rep, err
		}
		if r.Offset != next {
			return rep, &metastore.RecordError{Key: kv.Key, Kind: refKind, Reason: fmt.Sprintf("starts at %d, the refs before it end at %d", r.Offset, next)}
		}
		pos := r.Position()
		if n := len(pages); n == 0 || !pages[n-1].holds(r.Star, pos) {
			if n > 0 {
				pages[n-1].Sealed = true
			}
			pages = append(pages, newPage(stream, r.Star, r.Epoch, r.Offset))
		}
		pages[len(pages)-1].add(r.Slot, r.Span())
		next = r.Offset + r.Count
	}
	if next != h.Next {
		return rep, &metastore.RecordError{Key: hkv.Key, Kind: v1HeadKind, Reason: fmt.Sprintf("says the stream goes on at %d, its refs end at %d", h.Next, next)}
	}
	rep.Pages = len(pages)
	for i := range pages {
		if err := x.createPage(ctx, &pages[i]); err != nil {
			return rep, err
		}
	}
	return rep, x.deleteV1(ctx, stream, kvs, hkv.Key)
}

// deleteV1 deletes a stream's format-1 refs and then its head, which goes
// last: while it stands, running Migrate again finds what is left to do.
func (x *RefIndex) deleteV1(ctx context.Context, stream string, refs []metastore.KV, headKey string) error {
	keys := make([]string, 0, len(refs)+1)
	for _, kv := range refs {
		keys = append(keys, kv.Key)
	}
	keys = append(keys, headKey)
	for len(keys) > 0 {
		n := min(len(keys), MaxTxnOps)
		var t metastore.Txn
		for _, k := range keys[:n] {
			t.Then = append(t.Then, metastore.Op{Key: k, Delete: true})
		}
		if _, err := x.store.Txn(ctx, t); err != nil {
			return fmt.Errorf("settle migrate %s: delete format-1 keys: %w", stream, err)
		}
		keys = keys[n:]
	}
	x.forget(stream)
	return nil
}

// createPage creates page create-only; a page already there with the same
// bytes is the same page.
func (x *RefIndex) createPage(ctx context.Context, pg *refPage) error {
	v, err := pg.encode()
	if err != nil {
		return err
	}
	key := x.pageKey(pg.Stream, pg.First)
	_, err = metastore.Put(ctx, x.store, key, v, 0)
	if !errors.Is(err, metastore.ErrConflict) {
		return err
	}
	kv, gerr := x.store.Get(ctx, key)
	if gerr != nil {
		return fmt.Errorf("settle page %s: %w", key, gerr)
	}
	if !bytes.Equal(kv.Value, v) {
		return &metastore.RecordError{Key: key, Kind: pageKind, Reason: "differs from the page the migration writes"}
	}
	return nil
}

// decodeV1Ref decodes a format-1 ref, which must be stream's at the
// offset its key names.
func (x *RefIndex) decodeV1Ref(kv metastore.KV, stream string) (Ref, error) {
	var r Ref
	if err := metastore.DecodeRecord(kv.Key, kv.Value, refKind, v1RefFormat, &r); err != nil {
		return Ref{}, err
	}
	bad := func(reason string) (Ref, error) {
		return Ref{}, &metastore.RecordError{Key: kv.Key, Kind: refKind, Reason: reason}
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(kv.Key, x.v1Prefix(stream)), 10, 64)
	switch {
	case err != nil || fmt.Sprintf("%s%020d", x.v1Prefix(stream), n) != kv.Key:
		return bad("key is not an offset")
	case r.Stream != stream || r.Offset != n:
		return bad(fmt.Sprintf("claims stream %q offset %d", r.Stream, r.Offset))
	case epoch.ValidateName("star", r.Star) != nil:
		return bad(fmt.Sprintf("names no valid star: %q", r.Star))
	case r.Epoch == 0:
		return bad("epoch numbers start at 1")
	case r.Count == 0 || r.Offset+r.Count < r.Offset:
		return bad(fmt.Sprintf("covers %d offsets from %d", r.Count, r.Offset))
	case r.Start > r.End:
		return bad(fmt.Sprintf("its byte range [%d, %d) ends before it starts", r.Start, r.End))
	}
	return r, nil
}

// MigrateAll migrates every stream the index holds in format 1, yielding
// a report per stream; it stops at the first failure.
func (x *RefIndex) MigrateAll(ctx context.Context) iter.Seq2[MigrateReport, error] {
	return func(yield func(MigrateReport, error) bool) {
		kvs, _, err := x.store.List(ctx, x.root+"refheads/")
		if err != nil {
			yield(MigrateReport{}, fmt.Errorf("settle migrate: %w", err))
			return
		}
		for _, kv := range kvs {
			stream := strings.TrimPrefix(kv.Key, x.root+"refheads/")
			rep, err := x.Migrate(ctx, stream)
			if !yield(rep, err) || err != nil {
				return
			}
		}
	}
}
