package batch_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// encodeSub is the tests' Encode: "producer seq data" ("-" for no
// producer), which extract reads back.
func encodeSub(s batch.Submission, _ uint64) []byte {
	return fmt.Appendf(nil, "%s %d %s", cmp.Or(s.Producer, "-"), s.Seq, s.Data)
}

// wrapBundle is the tests' Wrap: a bundle of one record.
func wrapBundle(stream string, off uint64, rec []byte) []byte {
	b, err := batch.Encode([]batch.Stream{{Name: stream, Offset: off, Records: [][]byte{rec}}})
	if err != nil {
		panic(err)
	}
	return b
}

// failingReader is a ChunkReader whose reads fail while failing is set.
type failingReader struct {
	batch.ChunkReader
	failing atomic.Bool
}

func (r *failingReader) Read(ctx context.Context, stream string, from uint64) iter.Seq2[settle.Chunk, error] {
	if r.failing.Load() {
		return func(yield func(settle.Chunk, error) bool) {
			yield(settle.Chunk{}, fmt.Errorf("a read refused by the test: %w", metastore.ErrUnavailable))
		}
	}
	return r.ChunkReader.Read(ctx, stream, from)
}

// appenderWorld is a world whose stars are served by DedupAppenders,
// with what their hooks saw.
type appenderWorld struct {
	*world
	reads *failingReader
	mu    sync.Mutex
	opens []batch.OpenInfo
	saves []uint64 // offsets saved
	saved chan uint64
	// flushers: the appender each star flushes through, set by appender.
	flushers sync.Map
}

// newAppenderWorld starts a world whose star flushes through its
// appender (set by appender).
func newAppenderWorld(t *testing.T) *appenderWorld {
	w := &appenderWorld{saved: make(chan uint64, 100)}
	w.world = newWorld(t)
	w.reads = &failingReader{ChunkReader: w.env.Party("replayer").Streams}
	w.star.Abort()
	require.NoError(t, w.sess.Close(bounded(t)))
	w.star, w.sess = w.start(starName)
	return w
}

// start starts a star whose release flush is that of its appender.
func (w *appenderWorld) start(name string) (*lease.Star, metastore.Session) {
	var app atomic.Pointer[batch.DedupAppender]
	star, sess := w.startFlushing(name, func(ctx context.Context, stream string) error { return app.Load().Flush(ctx, stream) })
	w.flushers.Store(star, &app)
	return star, sess
}

// appender serves star, closed and waited for at the end of the test.
func (w *appenderWorld) appender(t *testing.T, star *lease.Star, opts batch.DedupAppenderOptions) *batch.DedupAppender {
	store, err := batch.NewDedupStore(star, w.reads, batch.DedupStoreOptions{Dedup: batch.DedupOptions{Producers: 8, Window: 4}, Extract: extract})
	require.NoError(t, err)
	opts.OnOpen = func(o batch.OpenInfo) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.opens = append(w.opens, o)
	}
	opts.OnSave = func(_ string, off uint64, err error) {
		if err == nil {
			w.mu.Lock()
			w.saves = append(w.saves, off)
			w.mu.Unlock()
			w.saved <- off
		}
	}
	opts.Wrap = wrapBundle
	a, err := batch.NewDedupAppender(batch.DedupAppenderConfig{Star: star, Store: store, Encode: encodeSub}, opts)
	require.NoError(t, err)
	if f, ok := w.flushers.Load(star); ok {
		f.(*atomic.Pointer[batch.DedupAppender]).Store(a)
	}
	t.Cleanup(func() {
		a.Close()
		star.Abort()
		a.Wait()
	})
	return a
}

func (w *appenderWorld) lastOpen() batch.OpenInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.opens[len(w.opens)-1]
}

// takeover crashes the world's star and starts another.
func (w *appenderWorld) takeover(t *testing.T, a *batch.DedupAppender) *lease.Star {
	a.Close()
	w.star.Abort()
	a.Wait()
	w.closed = true
	require.NoError(t, w.sess.Close(bounded(t)))
	star, _ := w.start("star-2")
	return star
}

func appendOK(t *testing.T, a *batch.DedupAppender, s batch.Submission) batch.Appended {
	t.Helper()
	got, err := a.Append(bounded(t), s)
	require.NoError(t, err, "append %s/%s %d", s.Stream, s.Producer, s.Seq)
	return got
}

func sub(producer string, seq uint64) batch.Submission {
	return batch.Submission{Stream: "s", Producer: producer, Seq: seq, Data: fmt.Appendf(nil, "data-%d", seq)}
}

// Each producer sequence is appended once: a retry gets the first
// receipt, one with other bytes or below the window is refused, retries
// racing with the first try land once, and records without a producer
// are appended every time.
func TestDedupAppenderExactlyOnce(t *testing.T) {
	w := newAppenderWorld(t)
	a := w.appender(t, w.star, batch.DedupAppenderOptions{})
	var first []batch.Appended
	for seq := range uint64(6) {
		got := appendOK(t, a, sub("p", seq))
		require.False(t, got.Duplicate)
		require.Equal(t, seq, got.Offset)
		first = append(first, got)
	}
	again := appendOK(t, a, sub("p", 4))
	require.True(t, again.Duplicate)
	require.Equal(t, first[4].Receipt, again.Receipt)

	other := sub("p", 5)
	other.Data = []byte("other bytes")
	_, err := a.Append(bounded(t), other)
	require.ErrorIs(t, err, batch.ErrPayloadConflict)
	require.ErrorIs(t, err, cutline.ErrConflict)
	_, err = a.Append(bounded(t), sub("p", 0))
	require.ErrorIs(t, err, batch.ErrSequenceTooOld, "below the window of 4")

	// Ten tries of one new sequence at once: one record.
	var wg sync.WaitGroup
	got := make([]batch.Appended, 10)
	for i := range got {
		wg.Go(func() { got[i] = appendOK(t, a, sub("q", 7)) })
	}
	wg.Wait()
	for _, g := range got {
		require.Equal(t, got[0].Receipt, g.Receipt)
	}
	for range 2 {
		appendOK(t, a, batch.Submission{Stream: "s", Data: []byte("no producer")})
	}
	w.closeStar()
	records := w.read("s")
	require.Len(t, records, 9, "%q", records)
	require.Equal(t, "q 7 data-7", records[6])
}

// A holder saves its table every 4 records and dies: the successor
// loads the snapshot, replays the tail, and answers retries with their
// first receipts.
func TestDedupAppenderTakeover(t *testing.T) {
	w := newAppenderWorld(t)
	a := w.appender(t, w.star, batch.DedupAppenderOptions{SnapshotEvery: 4, SnapshotInterval: -1})
	var first []batch.Appended
	for seq := range uint64(10) {
		first = append(first, appendOK(t, a, sub("p", seq)))
	}
	// Saves by count: the one that reaches 8 or more is the last.
	snap := <-w.saved
	for snap < 8 {
		snap = <-w.saved
	}
	star := w.takeover(t, a)
	b := w.appender(t, star, batch.DedupAppenderOptions{SnapshotEvery: -1, SnapshotInterval: -1})
	for _, seq := range []uint64{7, 9} {
		got := appendOK(t, b, sub("p", seq))
		require.True(t, got.Duplicate, "seq %d", seq)
		require.Equal(t, first[seq].Receipt, got.Receipt)
	}
	rb := w.lastOpen().Rebuild
	require.True(t, rb.HadSnapshot)
	require.Equal(t, snap, rb.Snapshot)
	require.Equal(t, 10-snap, rb.Replayed, "only the tail past the snapshot")
	require.Equal(t, uint64(10), appendOK(t, b, sub("p", 10)).Offset)
}

// An open whose rebuild failed leaves the stream held: the next Append
// adopts the tenure and rebuilds, rather than being refused for as long
// as the star holds the stream.
func TestDedupAppenderAdoptsAfterAFailedRebuild(t *testing.T) {
	w := newAppenderWorld(t)
	opts := batch.DedupAppenderOptions{SnapshotEvery: -1, SnapshotInterval: -1}
	a := w.appender(t, w.star, opts)
	first := appendOK(t, a, sub("p", 0))
	appendOK(t, a, sub("p", 1))
	star := w.takeover(t, a)
	b := w.appender(t, star, opts)
	w.reads.failing.Store(true)
	_, err := b.Append(bounded(t), sub("p", 2))
	require.ErrorContains(t, err, "rebuild the producers of s")
	require.Len(t, star.Streams(), 1, "the star holds the stream it could not make ready")
	w.reads.failing.Store(false)
	again := appendOK(t, b, sub("p", 0))
	require.True(t, again.Duplicate)
	require.Equal(t, first.Receipt, again.Receipt)
	require.True(t, w.lastOpen().Adopted)
	require.Equal(t, uint64(2), appendOK(t, b, sub("p", 2)).Offset)
}

// A planned handoff leaves each stream with its table saved at the
// tenure's end: the successor replays nothing.
func TestDedupAppenderReleaseSaves(t *testing.T) {
	w := newAppenderWorld(t)
	a := w.appender(t, w.star, batch.DedupAppenderOptions{SnapshotEvery: -1, SnapshotInterval: -1})
	for seq := range uint64(5) {
		appendOK(t, a, sub("p", seq))
	}
	require.NoError(t, a.Release(bounded(t)))
	require.Equal(t, uint64(5), <-w.saved, "the release flush saved the table")
	known, _ := a.SuspectForTest("s")
	require.False(t, known, "released streams are forgotten")

	star := w.takeover(t, a)
	b := w.appender(t, star, batch.DedupAppenderOptions{})
	require.True(t, appendOK(t, b, sub("p", 3)).Duplicate)
	rb := w.lastOpen().Rebuild
	require.Equal(t, uint64(5), rb.Snapshot)
	require.Zero(t, rb.Replayed)
}

// By time, a table is saved every SnapshotInterval on the clock, and
// only when records came since the last save.
func TestDedupAppenderSavesByTime(t *testing.T) {
	w := newAppenderWorld(t)
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := w.appender(t, w.star, batch.DedupAppenderOptions{SnapshotEvery: -1, SnapshotInterval: time.Hour, Clock: fake})
	for seq := range uint64(5) {
		appendOK(t, a, sub("p", seq))
	}
	fake.BlockUntil(1)
	require.Empty(t, w.saved, "none before the interval")
	fake.Advance(time.Hour)
	require.Equal(t, uint64(5), <-w.saved)
	fake.BlockUntil(1) // the loop waits on its next interval
	fake.Advance(time.Hour)
	fake.BlockUntil(1)
	appendOK(t, a, sub("p", 5))
	fake.Advance(time.Hour)
	require.Equal(t, uint64(6), <-w.saved, "the interval with nothing new saved nothing")
}

// Past MaxStreams, an Append to one more stream is refused; the streams
// open go on.
func TestDedupAppenderMaxStreams(t *testing.T) {
	w := newAppenderWorld(t)
	a := w.appender(t, w.star, batch.DedupAppenderOptions{MaxStreams: 2})
	for _, s := range []string{"a", "b"} {
		appendOK(t, a, batch.Submission{Stream: s})
	}
	_, err := a.Append(bounded(t), batch.Submission{Stream: "c"})
	require.ErrorIs(t, err, batch.ErrTooManyStreams)
	require.ErrorIs(t, err, cutline.ErrUnavailable)
	require.Equal(t, uint64(1), appendOK(t, a, batch.Submission{Stream: "a"}).Offset)
}

// An Append whose token was judged before a Fence is judged again after
// it, never submitted on the old judgement.
func TestDedupAppenderJudgedAgainAfterFence(t *testing.T) {
	w := newAppenderWorld(t)
	a := w.appender(t, w.star, batch.DedupAppenderOptions{})
	appendOK(t, a, batch.Submission{Stream: "s", Data: []byte("open")})
	a.SetAfterJudgeForTest(func() {
		a.SetAfterJudgeForTest(nil)
		_, err := a.Fence(bounded(t), "s", lease.Fenced, "tok")
		require.NoError(t, err)
	})
	_, err := a.Append(bounded(t), batch.Submission{Stream: "s", Data: []byte("judged before")})
	require.ErrorIs(t, err, lease.ErrStaleToken, "judged again: no token on a fenced stream")
	appendOK(t, a, batch.Submission{Stream: "s", Token: "tok", Data: []byte("with the token")})
	w.closeStar()
	require.Equal(t, []string{"- 0 open", "- 0 with the token"}, w.read("s"))
}

// An Append that took the stream's state before a reopen replaced it is
// judged by the current state: R2 takes the state and waits; the stream
// turns suspect (an append of unknown outcome), a resend of the same
// sequence (R1) reopens it and lands; when R2 goes on, it is a
// duplicate of R1, not a second copy.
func TestDedupAppenderJudgedByTheCurrentState(t *testing.T) {
	w := newAppenderWorld(t)
	a := w.appender(t, w.star, batch.DedupAppenderOptions{})
	for seq := range uint64(3) {
		appendOK(t, a, sub("p", seq))
	}
	var r1 batch.Appended
	a.SetAfterJudgeForTest(func() {
		a.SetAfterJudgeForTest(nil)
		a.MarkSuspectForTest("s")
		r1 = appendOK(t, a, sub("p", 3))
	})
	r2 := appendOK(t, a, sub("p", 3))
	require.False(t, r1.Duplicate)
	require.Equal(t, uint64(3), r1.Offset)
	require.True(t, r2.Duplicate, "R2 appended again at offset %d", r2.Offset)
	require.Equal(t, r1.Receipt, r2.Receipt)
	_, suspect := a.SuspectForTest("s")
	require.False(t, suspect)
	w.closeStar()
	require.Len(t, w.read("s"), 4)
}

// A reopen that fails keeps the stream suspect: the next Append leaves
// the stream through Finish again and opens a new tenure, rather than
// adopting the one the failed reopen left held.
func TestDedupAppenderFailedReopenStaysSuspect(t *testing.T) {
	w := newAppenderWorld(t)
	a := w.appender(t, w.star, batch.DedupAppenderOptions{SnapshotEvery: -1, SnapshotInterval: -1})
	var first []batch.Appended
	for seq := range uint64(3) {
		first = append(first, appendOK(t, a, sub("p", seq)))
	}
	tenure := func() uint64 {
		for _, ten := range w.star.Streams() {
			if ten.Stream == "s" {
				return ten.Tenure
			}
		}
		return 0
	}
	a.MarkSuspectForTest("s")
	was := tenure()
	w.reads.failing.Store(true)
	_, err := a.Append(bounded(t), sub("p", 3))
	require.ErrorContains(t, err, "rebuild the producers of s")
	require.ErrorIs(t, err, metastore.ErrUnavailable)
	failed := tenure()
	require.Greater(t, failed, was, "the reopen left the stream and opened it again")
	_, suspect := a.SuspectForTest("s")
	require.True(t, suspect, "the stream stays suspect after a failed reopen")

	w.reads.failing.Store(false)
	again := appendOK(t, a, sub("p", 1))
	require.True(t, again.Duplicate)
	require.Equal(t, first[1].Receipt, again.Receipt)
	require.Greater(t, tenure(), failed, "the next Append left the stream through Finish again")
	require.Equal(t, uint64(3), appendOK(t, a, sub("p", 3)).Offset)
}

// Configurations out of bounds are refused, naming the field.
func TestDedupAppenderRefusesConfig(t *testing.T) {
	w := newAppenderWorld(t)
	store, err := batch.NewDedupStore(w.star, w.reads, batch.DedupStoreOptions{Extract: extract})
	require.NoError(t, err)
	cfg := batch.DedupAppenderConfig{Star: w.star, Store: store, Encode: encodeSub}
	for field, c := range map[string]struct {
		cfg  batch.DedupAppenderConfig
		opts batch.DedupAppenderOptions
	}{
		"Star":             {cfg: batch.DedupAppenderConfig{Store: store, Encode: encodeSub}},
		"Store":            {cfg: batch.DedupAppenderConfig{Star: w.star, Encode: encodeSub}},
		"Encode":           {cfg: batch.DedupAppenderConfig{Star: w.star, Store: store}},
		"MaxStreams":       {cfg: cfg, opts: batch.DedupAppenderOptions{MaxStreams: batch.MaxAppenderStreams + 1}},
		"OpenWait":         {cfg: cfg, opts: batch.DedupAppenderOptions{OpenWait: batch.MaxOpenWait + 1}},
		"FlushWait":        {cfg: cfg, opts: batch.DedupAppenderOptions{FlushWait: -1}},
		"OpenRetry":        {cfg: cfg, opts: batch.DedupAppenderOptions{OpenRetry: time.Microsecond}},
		"SnapshotInterval": {cfg: cfg, opts: batch.DedupAppenderOptions{SnapshotInterval: time.Millisecond}},
	} {
		_, err := batch.NewDedupAppender(c.cfg, c.opts)
		ce, ok := errors.AsType[*cutline.ConfigError](err)
		require.True(t, ok, "%s: %v", field, err)
		require.Equal(t, field, ce.Field)
	}
	a := w.appender(t, w.star, batch.DedupAppenderOptions{})
	_, err = a.Append(bounded(t), batch.Submission{Stream: "../s"})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	a.Close()
	_, err = a.Append(bounded(t), batch.Submission{Stream: "s"})
	require.ErrorIs(t, err, cutline.ErrClosed)
}
