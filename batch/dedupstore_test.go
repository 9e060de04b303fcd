package batch_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// extract reads the records the tests write: "producer seq".
func extract(_ string, _ uint64, rec []byte) (string, uint64, error) {
	var p string
	var seq uint64
	if _, err := fmt.Sscanf(string(rec), "%s %d", &p, &seq); err != nil {
		return "", 0, err
	}
	if p == "-" {
		return "", 0, nil
	}
	return p, seq, nil
}

// counting is a ChunkReader that records the offsets of the chunks it
// served.
type counting struct {
	batch.ChunkReader
	mu   sync.Mutex
	seen []uint64
}

func (c *counting) Read(ctx context.Context, stream string, from uint64) iter.Seq2[settle.Chunk, error] {
	return func(yield func(settle.Chunk, error) bool) {
		for ch, err := range c.ChunkReader.Read(ctx, stream, from) {
			if err == nil {
				c.mu.Lock()
				c.seen = append(c.seen, ch.Offset)
				c.mu.Unlock()
			}
			if !yield(ch, err) {
				return
			}
		}
	}
}

// dedupWorld is a world whose host writes records "producer seq" to
// stream "s" and keeps their table.
type dedupWorld struct {
	*world
	p     *batch.Producer
	table *batch.Dedup
}

func newDedupWorld(t *testing.T) *dedupWorld {
	w := newWorld(t, "s")
	return &dedupWorld{world: w, p: w.producer(batch.Options{MaxRecords: 3}), table: newDedup(t, 8, 4)}
}

// produce appends the records and applies them to the host's table.
func (w *dedupWorld) produce(t *testing.T, recs ...string) {
	var acks []*batch.Ack
	for _, r := range recs {
		acks = append(acks, add(t, w.p, "s", r))
	}
	for i, a := range acks {
		pos, off, err := wait(t, a)
		require.NoError(t, err)
		p, seq, err := extract("s", off, []byte(recs[i]))
		require.NoError(t, err)
		w.table.Apply(p, seq, batch.Receipt{Offset: off, Position: pos})
	}
}

// dedupStore returns a DedupStore over star that counts its reads.
func (w *dedupWorld) dedupStore(t *testing.T, star *lease.Star) (*batch.DedupStore, *counting) {
	reads := &counting{ChunkReader: w.env.Party("replayer").Streams}
	s, err := batch.NewDedupStore(star, reads, batch.DedupStoreOptions{Dedup: batch.DedupOptions{Producers: 8, Window: 4}, Extract: extract, ReadAhead: 2, Batch: 5})
	require.NoError(t, err)
	return s, reads
}

// takeover crashes the world's star and opens "s" on a new one.
func (w *dedupWorld) takeover(t *testing.T) (*lease.Star, lease.Tenure) {
	require.NoError(t, w.p.Flush(bounded(t)))
	w.star.Abort()
	w.closed = true
	require.NoError(t, w.sess.Close(bounded(t)))
	star, _ := w.start("star-2")
	t.Cleanup(star.Abort)
	ten, err := star.Open(bounded(t), "s", lease.OpenOptions{})
	require.NoError(t, err)
	return star, ten
}

func seqs(p string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s %d", p, i))
	}
	return out
}

// A holder saves its table at 10 and crashes after 16 records: the
// successor loads the snapshot, reads back only the tail, and answers
// retries on either side of the snapshot with their first receipts.
func TestDedupStoreTakeover(t *testing.T) {
	w := newDedupWorld(t)
	s, _ := w.dedupStore(t, w.star)
	w.produce(t, seqs("p", 0, 10)...)
	require.NoError(t, s.Save(bounded(t), "s", w.table.Clone()), "saves after an absorb")
	w.produce(t, append(seqs("q", 0, 5), "- 0")...)
	want := w.table

	star, ten := w.takeover(t)
	require.Equal(t, uint64(16), ten.Next)
	s, reads := w.dedupStore(t, star)
	got, rb, err := s.Rebuild(bounded(t), "s", ten.Next)
	require.NoError(t, err)
	require.Equal(t, batch.RebuildInfo{Stream: "s", HadSnapshot: true, Snapshot: 10, Replayed: 6, Next: 16}, rb)
	requireSameTable(t, want, got)
	for _, off := range reads.seen {
		require.GreaterOrEqual(t, off, uint64(9), "a chunk below the snapshot was read") // flights of 3: [9, 12) holds 10
	}
	for _, ps := range [][2]any{{"p", uint64(9)}, {"q", uint64(4)}} {
		r, v := got.Lookup(ps[0].(string), ps[1].(uint64))
		r0, _ := want.Lookup(ps[0].(string), ps[1].(uint64))
		require.Equal(t, batch.Duplicate, v, "%v", ps)
		require.Equal(t, r0, r)
	}
	_, v := got.Lookup("p", 2)
	require.Equal(t, batch.TooOld, v, "below the window")

	// The new holder saves at its start; an older save is kept out.
	require.NoError(t, s.Save(bounded(t), "s", got))
	old := newDedup(t, 8, 4)
	require.NoError(t, s.Save(bounded(t), "s", old), "a snapshot further on is kept")
	sn, err := lease.ReadSnapshot(bounded(t), w.store, "", "s")
	require.NoError(t, err)
	require.Equal(t, uint64(16), sn.Offset)
}

// Snapshots the store cannot use are set aside, and the whole stream is
// replayed: bytes that are no table, a table that does not stand at the
// snapshot's offset, a record that does not decode, one past the
// tenure's start.
func TestDedupStoreSetsAside(t *testing.T) {
	for name, c := range map[string]struct {
		plant func(t *testing.T, w *dedupWorld)
		want  error
	}{
		"not a table": {want: batch.ErrDedupFormat, plant: func(t *testing.T, w *dedupWorld) {
			require.NoError(t, w.star.Absorb(bounded(t)))
			require.NoError(t, w.star.SaveSnapshot(bounded(t), "s", 6, []byte("garbage")))
		}},
		"stale": {want: lease.ErrBadSnapshot, plant: func(t *testing.T, w *dedupWorld) {
			stale := newDedup(t, 8, 4)
			stale.Apply("p", 0, batch.Receipt{})
			require.NoError(t, w.star.Absorb(bounded(t)))
			require.NoError(t, w.star.SaveSnapshot(bounded(t), "s", 6, marshal(t, stale)))
		}},
		"corrupt record": {want: lease.ErrBadSnapshot, plant: func(t *testing.T, w *dedupWorld) {
			require.NoError(t, w.star.Absorb(bounded(t)))
			require.NoError(t, w.star.SaveSnapshot(bounded(t), "s", 6, marshal(t, w.table)))
			kvs, _, err := w.store.List(bounded(t), "streams/")
			require.NoError(t, err)
			key := ""
			for _, kv := range kvs {
				if strings.HasSuffix(kv.Key, "/snapshot") {
					key = kv.Key
				}
			}
			require.NotEmpty(t, key)
			_, err = w.store.Txn(bounded(t), metastore.Txn{Then: []metastore.Op{{Key: key, Value: []byte("{")}}})
			require.NoError(t, err)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			w := newDedupWorld(t)
			w.produce(t, seqs("p", 0, 6)...)
			c.plant(t, w)
			want := w.table
			star, ten := w.takeover(t)
			s, _ := w.dedupStore(t, star)
			got, rb, err := s.Rebuild(bounded(t), "s", ten.Next)
			require.NoError(t, err)
			require.ErrorIs(t, rb.SetAside, c.want)
			require.ErrorIs(t, rb.SetAside, cutline.ErrCorrupt)
			rb.SetAside = nil
			require.Equal(t, batch.RebuildInfo{Stream: "s", Replayed: 6, Next: 6}, rb)
			requireSameTable(t, want, got)
		})
	}

	// A snapshot past the tenure's start (a rebuild asked for less than
	// the stream holds) is set aside too.
	w := newDedupWorld(t)
	w.produce(t, seqs("p", 0, 6)...)
	s, _ := w.dedupStore(t, w.star)
	require.NoError(t, s.Save(bounded(t), "s", w.table.Clone()))
	got, rb, err := s.Rebuild(bounded(t), "s", 3)
	require.NoError(t, err)
	require.ErrorIs(t, rb.SetAside, lease.ErrBadSnapshot)
	require.Equal(t, uint64(3), got.Next())
	require.Equal(t, uint64(3), rb.Replayed)
}

// Records below the retention point are skipped: the table starts past
// them, and keeps what the records from there say.
func TestDedupStoreRetention(t *testing.T) {
	w := newDedupWorld(t)
	w.produce(t, append(seqs("a", 0, 6), seqs("p", 0, 3)...)...)
	require.NoError(t, w.star.Absorb(bounded(t)))
	_, err := w.env.Party("trimmer").Refs.Retain(bounded(t), "s", 6)
	require.NoError(t, err)
	star, ten := w.takeover(t)
	s, reads := w.dedupStore(t, star)
	got, rb, err := s.Rebuild(bounded(t), "s", ten.Next)
	require.NoError(t, err)
	require.Equal(t, batch.RebuildInfo{Stream: "s", Replayed: 3, Skipped: 6, Next: 9}, rb)
	require.NotEmpty(t, reads.seen)
	_, v := got.Lookup("p", 2)
	require.Equal(t, batch.Duplicate, v)
	_, v = got.Lookup("a", 5)
	require.Equal(t, batch.Fresh, v, "the skipped records are unknown")
}

// A failure to load the snapshot or to read the tail fails the rebuild,
// and options out of bounds are refused.
func TestDedupStoreFails(t *testing.T) {
	w := newDedupWorld(t)
	w.produce(t, seqs("p", 0, 3)...)
	require.NoError(t, w.star.Absorb(bounded(t)))
	broken := func(string, uint64, []byte) (string, uint64, error) { return "", 0, errors.New("not ours") }
	s, err := batch.NewDedupStore(w.star, w.env.Party("r").Streams, batch.DedupStoreOptions{Extract: broken})
	require.NoError(t, err)
	_, _, err = s.Rebuild(bounded(t), "s", 3)
	require.ErrorContains(t, err, "not ours")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err = s.Rebuild(ctx, "s", 3)
	require.ErrorIs(t, err, context.Canceled)
	_, _, err = s.Rebuild(bounded(t), "s", 4)
	require.Error(t, err, "the coverage ends before the offset asked for")

	reader := w.env.Party("r").Streams
	for _, c := range []struct {
		star    *lease.Star
		chunks  batch.ChunkReader
		opts    batch.DedupStoreOptions
		invalid string
	}{
		{nil, reader, batch.DedupStoreOptions{Extract: extract}, "star"},
		{w.star, nil, batch.DedupStoreOptions{Extract: extract}, "chunks"},
		{w.star, reader, batch.DedupStoreOptions{}, "Extract"},
		{w.star, reader, batch.DedupStoreOptions{Extract: extract, ReadAhead: -1}, "ReadAhead"},
		{w.star, reader, batch.DedupStoreOptions{Extract: extract, Batch: batch.MaxDedupReadAhead + 1}, "Batch"},
		{w.star, reader, batch.DedupStoreOptions{Extract: extract, Dedup: batch.DedupOptions{Producers: -1}}, "Producers"},
	} {
		_, err := batch.NewDedupStore(c.star, c.chunks, c.opts)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, c.invalid, ce.Field)
		require.ErrorIs(t, err, cutline.ErrInvalid)
	}
}

// A clone shares nothing with its table.
func TestDedupClone(t *testing.T) {
	d := newDedup(t, 2, 4)
	for i := range uint64(6) {
		d.Apply(fmt.Sprint("p", i%3), i, at(i))
	}
	c := d.Clone()
	requireSameTable(t, d, c)
	before := marshal(t, c)
	d.Apply("p0", 9, at(6))
	d.Apply("p9", 0, at(7))
	require.Equal(t, before, marshal(t, c))
	c.Apply("p0", 9, at(6))
	c.Apply("p9", 0, at(7))
	requireSameTable(t, d, c)
}
