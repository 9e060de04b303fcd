package chain_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
)

func TestAbort(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 8)
	g := newGate()
	for _, h := range e.hooks {
		h.setCreate(g.hook(func(key string) bool { return slotOf(key) >= 2 }))
	}
	w := e.writer(rec, chain.WriterOptions{})
	fs := submitAll(t, w, 5)
	requireAcked(t, rec, fs[:2])
	g.await(t, 9)
	w.Abort()
	for _, f := range fs[2:] {
		_, err := f.Wait(bounded(t))
		require.ErrorIs(t, err, chain.ErrAborted)
		var ae *chain.AbortedError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, f.Slot(), ae.Slot)
		require.Equal(t, payload(int(f.Slot())), f.Payload())
	}
	_, err := w.Submit(bounded(t), payload(5))
	require.ErrorIs(t, err, cutline.ErrClosed)
	w.Abort() // idempotent
	require.NoError(t, w.Close(bounded(t)))
	require.NoError(t, w.Err())
}

func TestCloseWaitsForDecisions(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 8)
	g := newGate()
	for _, h := range e.hooks {
		h.setCreate(g.hook(nil))
	}
	w := e.writer(rec, chain.WriterOptions{})
	fs := submitAll(t, w, 4)
	g.await(t, 12)
	ctx, cancel := context.WithCancel(bounded(t))
	cancel()
	require.ErrorIs(t, w.Close(ctx), context.Canceled)
	_, err := w.Submit(bounded(t), payload(4))
	require.ErrorIs(t, err, cutline.ErrClosed)
	for _, f := range fs {
		select {
		case <-f.Done():
			t.Fatal("decided before the buckets answered")
		default:
		}
	}
	g.Open()
	require.NoError(t, w.Close(bounded(t)))
	requireAcked(t, rec, fs)
	require.Equal(t, uint64(12), w.Stats().Copies, "Close waits for every bucket's attempt")
}

func TestPayloadTooLarge(t *testing.T) {
	e := newEnv(t, 1)
	rec := e.mint(1, 4)
	w := e.writer(rec, chain.WriterOptions{})
	_, err := w.Submit(bounded(t), make([]byte, chain.MaxPayload+1))
	require.ErrorIs(t, err, chain.ErrPayloadTooLarge)
	var pe *chain.PayloadError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, chain.MaxPayload+1, pe.Size)
	require.Zero(t, w.Stats().Submitted)
	pos, err := w.Append(bounded(t), nil) // empty payloads are fine
	require.NoError(t, err)
	require.Equal(t, uint64(0), pos.Slot)
	require.NoError(t, w.Close(bounded(t)))
}

// TestResumeRefused is the resumed-epoch schedule: a first writer's
// flight X for slot 0 landed in zone a only when it crashed; a restarted
// host must not be able to build a second writer on the epoch, whether
// from the record read back or from the minted one again.
func TestResumeRefused(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 4)
	first := e.writer(rec, chain.WriterOptions{})
	first.Abort()
	e.put(0, rec, 0, wire.EncodeFlight(star, rec.Epoch, 0, []byte("X")))

	_, err := chain.NewWriter(rec, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrClaimed, "the minted record was claimed by the first writer")
	copied := *rec
	_, err = chain.NewWriter(&copied, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrClaimed, "a copy of the minted record shares its claim")
	back, err := e.minter.Get(bounded(t), star, rec.Epoch)
	require.NoError(t, err)
	_, err = chain.NewWriter(back, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrNotMinted, "a record read back cannot be written")
	for r, err := range e.minter.Epochs(bounded(t), star) {
		require.NoError(t, err)
		_, err = chain.NewWriter(r, chain.MustZones(e.buckets...), chain.WriterOptions{})
		require.ErrorIs(t, err, epoch.ErrNotMinted)
	}
	// Nothing was written by the refused writers: zone a still holds X
	// alone, zones b and c nothing.
	require.Equal(t, 1, e.mems[0].Len())
	require.Equal(t, 0, e.mems[1].Len()+e.mems[2].Len())
}

// TestWriterCheckpoint: the writer moves its open epoch's checkpoint, never
// past what it acknowledged; the minter alone refuses to move it.
func TestWriterCheckpoint(t *testing.T) {
	ctx := bounded(t)
	e := newEnv(t, 3)
	rec := e.mint(2, 4)
	w := e.writer(rec, chain.WriterOptions{})
	for i := range 3 {
		_, err := w.Append(ctx, payload(i))
		require.NoError(t, err)
	}
	_, err := w.Checkpoint(ctx, 1000)
	require.ErrorIs(t, err, epoch.ErrCursorAhead)
	_, err = e.minter.Advance(ctx, star, rec.Epoch, epoch.Cursors{Checkpoint: 1000})
	require.ErrorIs(t, err, epoch.ErrState, "only the writer moves an open epoch's checkpoint")
	_, err = e.minter.Advance(ctx, star, rec.Epoch, epoch.Cursors{Checkpoint: 2})
	require.ErrorIs(t, err, epoch.ErrState)
	got, err := w.Checkpoint(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, uint64(3), got.Cursors.Checkpoint)
	_, err = w.Checkpoint(ctx, 2)
	require.ErrorIs(t, err, epoch.ErrCursorRegression)
	require.Equal(t, uint64(3), e.record(rec).Cursors.Checkpoint)
	require.NoError(t, w.Close(ctx))
}

func TestNewWriterValidation(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 4)
	var ce *cutline.ConfigError
	// A zone the record names is missing from the zone set.
	_, err := chain.NewWriter(rec, chain.MustZones(e.buckets[:2]...), chain.WriterOptions{})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "buckets[2]", ce.Field)
	_, err = chain.NewWriter(rec, nil, chain.WriterOptions{})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "buckets[0]", ce.Field)
	_, err = chain.NewWriter(nil, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorAs(t, err, &ce)
	for _, tc := range []struct {
		opts  chain.WriterOptions
		field string
	}{
		{chain.WriterOptions{Backoff: clock.Backoff{Min: -1}}, "Backoff.Min"},
		{chain.WriterOptions{Backoff: clock.Backoff{Max: -1}}, "Backoff.Max"},
		{chain.WriterOptions{Backoff: clock.Backoff{Min: time.Second, Max: time.Millisecond}}, "Backoff.Max"},
		{chain.WriterOptions{Backoff: clock.Backoff{Min: clock.MaxBackoff + 1}}, "Backoff.Min"},
		{chain.WriterOptions{Backoff: clock.Backoff{Max: clock.MaxBackoff + 1}}, "Backoff.Max"},
	} {
		_, err := chain.NewWriter(rec, chain.MustZones(e.buckets...), tc.opts)
		require.ErrorAs(t, err, &ce, "%+v", tc.opts)
		require.Equal(t, tc.field, ce.Field)
		require.ErrorIs(t, err, cutline.ErrInvalid)
	}

	fenced, err := e.minter.Publish(bounded(t), star, rec.Epoch, 0)
	require.NoError(t, err)
	_, err = chain.NewWriter(fenced, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrState)
	// Refused options did not take the minted record's claim.
	stale := *rec
	stale.State = epoch.StateFenced
	_, err = chain.NewWriter(&stale, chain.MustZones(e.buckets...), chain.WriterOptions{})
	require.ErrorIs(t, err, epoch.ErrState)
	var se *epoch.StateError
	require.ErrorAs(t, err, &se)
	require.Equal(t, epoch.StateFenced, se.Have)
}
