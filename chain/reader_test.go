package chain_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/memblob"
)

// writeAll appends payloads [from, to) to rec with a fresh writer, closes
// it, and returns its release point.
func (e *env) writeAll(rec *epoch.Record, from, to int) uint64 {
	e.t.Helper()
	w := e.writer(rec, chain.WriterOptions{})
	for i := from; i < to; i++ {
		_, err := w.Append(bounded(e.t), payload(i))
		require.NoError(e.t, err)
	}
	require.NoError(e.t, w.Close(bounded(e.t)))
	return w.Released()
}

func (e *env) publish(rec *epoch.Record, cut uint64) *epoch.Record {
	e.t.Helper()
	r, err := e.minter.Publish(bounded(e.t), rec.Star, rec.Epoch, cut)
	require.NoError(e.t, err)
	return r
}

// putFlight stores slot's flight carrying payload(i) in the given buckets.
func (e *env) putFlight(rec *epoch.Record, slot uint64, i int, buckets ...int) {
	e.t.Helper()
	for _, b := range buckets {
		e.put(b, rec, slot, wire.EncodeFlight(rec.Star, rec.Epoch, slot, payload(i)))
	}
}

func requireFlights(t *testing.T, got []chain.Flight, want ...chain.Flight) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].Position, got[i].Position, "flight %d", i)
		require.Equal(t, string(want[i].Payload), string(got[i].Payload), "flight %d", i)
	}
}

func flight(ep, slot uint64, i int) chain.Flight {
	return chain.Flight{Position: chain.Position{Epoch: ep, Slot: slot}, Payload: payload(i)}
}

// The reader returns exactly the acknowledged payloads, once each, in
// order, across a fenced epoch (with garbage past its cut), a burned epoch
// number and an open epoch.
func TestReaderAcrossEpochs(t *testing.T) {
	e := newEnv(t, 3)
	ctx := bounded(t)

	// Epoch 1: slot 7 is dead; the writer halts there. Slot 8 may have
	// landed (pipelined garbage past the cut).
	e1 := e.mint(2, 4)
	e.poison(0, e1, 7)
	e.poison(1, e1, 7)
	w := e.writer(e1, chain.WriterOptions{})
	var acked []chain.Flight
	for i := 0; ; i++ {
		require.Less(t, i, 1000, "the writer never halted at the poisoned slot 7")
		f, err := w.Submit(ctx, payload(i))
		if err != nil {
			require.ErrorIs(t, err, chain.ErrFenced)
			break
		}
		if pos, err := f.Wait(ctx); err == nil {
			acked = append(acked, chain.Flight{Position: pos, Payload: payload(i)})
		}
	}
	require.NoError(t, w.Close(ctx))
	require.Equal(t, uint64(7), w.Released())
	e1 = e.publish(e1, w.Released())

	// Epoch 2 is burned: its record is gone.
	e2 := e.mint(2, 4)
	_, err := e.store.Txn(ctx, metastore.Txn{Then: []metastore.Op{{Key: e.minter.RecordKey(star, e2.Epoch), Delete: true}}})
	require.NoError(t, err)

	// Epoch 3: open, 5 flights.
	e3 := e.mint(2, 4)
	require.Equal(t, uint64(5), e.writeAll(e3, 100, 105))
	for i := range 5 {
		acked = append(acked, flight(e3.Epoch, uint64(i), 100+i))
	}

	r := e.reader()
	got, err := readAll(t, r, chain.Position{})
	require.NoError(t, err)
	requireFlights(t, got, acked...)

	got, err = readAll(t, r, chain.Position{Epoch: e1.Epoch, Slot: 5})
	require.NoError(t, err)
	requireFlights(t, got, acked[5:]...)

	got, err = readAll(t, r, chain.Position{Epoch: e2.Epoch, Slot: 3})
	require.NoError(t, err)
	requireFlights(t, got, acked[7:]...)

	got, err = readAll(t, r, chain.Position{Epoch: e3.Epoch, Slot: 3})
	require.NoError(t, err)
	requireFlights(t, got, acked[10:]...)

	got, err = readAll(t, r, chain.Position{Epoch: e3.Epoch + 1})
	require.NoError(t, err)
	require.Empty(t, got)

	// Stopping early works.
	n := 0
	for _, err := range r.Flights(ctx, star, chain.Position{}) {
		require.NoError(t, err)
		n++
		if n == 3 {
			break
		}
	}
	require.Equal(t, 3, n)
}

// The writer's release point is a valid cut: a successor publishes it and
// reads exactly what was acknowledged.
func TestReaderAfterPublishAtRelease(t *testing.T) {
	e := newEnv(t, 3)
	e1 := e.mint(2, 8)
	cut := e.writeAll(e1, 0, 10)
	e.publish(e1, cut)
	e2 := e.mint(2, 8)
	e.writeAll(e2, 10, 15)
	got, err := readAll(t, e.reader(), chain.Position{})
	require.NoError(t, err)
	var want []chain.Flight
	for i := range 10 {
		want = append(want, flight(e1.Epoch, uint64(i), i))
	}
	for i := range 5 {
		want = append(want, flight(e2.Epoch, uint64(i), 10+i))
	}
	requireFlights(t, got, want...)
}

// An open epoch yields its contiguous committed prefix and then stops: not
// past a slot short of W copies, and not into later epochs.
func TestReaderOpenEpochStopsAtPrefix(t *testing.T) {
	e := newEnv(t, 3)
	e1 := e.mint(2, 8)
	e.writeAll(e1, 0, 2)
	e.putFlight(e1, 2, 2, 1)       // one copy: not committed
	e.putFlight(e1, 3, 3, 0, 1, 2) // committed, but after a hole
	e2 := e.mint(2, 8)
	e.writeAll(e2, 10, 12)

	r := e.reader()
	got, err := readAll(t, r, chain.Position{})
	require.NoError(t, err)
	requireFlights(t, got, flight(e1.Epoch, 0, 0), flight(e1.Epoch, 1, 1))

	// Starting past the hole does not skip it.
	got, err = readAll(t, r, chain.Position{Epoch: e1.Epoch, Slot: 3})
	require.NoError(t, err)
	require.Empty(t, got)

	// The hole gets its second copy (a fencer's repair): the prefix grows.
	e.putFlight(e1, 2, 2, 2)
	got, err = readAll(t, r, chain.Position{Epoch: e1.Epoch, Slot: 1})
	require.NoError(t, err)
	requireFlights(t, got, flight(e1.Epoch, 1, 1), flight(e1.Epoch, 2, 2), flight(e1.Epoch, 3, 3))

	// Once the epoch is fenced, the reader goes on to the next epoch.
	e.publish(e1, 4)
	got, err = readAll(t, r, chain.Position{Epoch: e1.Epoch, Slot: 3})
	require.NoError(t, err)
	requireFlights(t, got, flight(e1.Epoch, 3, 3), flight(e2.Epoch, 0, 10), flight(e2.Epoch, 1, 11))
}

// A flight is served from any bucket with a valid copy: down buckets,
// absent, poisoned and checksum-corrupted copies are skipped.
func TestReaderFallback(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "open"}[fenced], func(t *testing.T) {
			e := newEnv(t, 3)
			rec := e.mint(2, 8)
			for s := range 6 {
				e.putFlight(rec, uint64(s), s, 0, 1, 2)
			}
			// Slot 2: bucket a corrupt, bucket b down, bucket c valid.
			// Slot 4: bucket a corrupt, b down.
			corrupt := func(slot uint64, i int) {
				data := wire.EncodeFlight(star, rec.Epoch, slot, payload(int(slot)))
				data[len(data)-1] ^= 0xff
				require.NoError(t, e.mems[i].Delete(bounded(t), e.key(rec, slot)))
				e.put(i, rec, slot, data)
			}
			corrupt(2, 0)
			corrupt(4, 0)
			e.hooks[1].setRead(downRead)
			if fenced {
				e.publish(rec, 6)
			}
			// In the open epoch a copy with a corrupt body does not count
			// toward W, though its header is intact: slot 2 holds one
			// verified copy (c), so the committed prefix ends there. A
			// fenced epoch's slots below the cut are served from c.
			got, err := readAll(t, e.reader(), chain.Position{})
			require.NoError(t, err)
			n := 6
			if !fenced {
				n = 2
			}
			var want []chain.Flight
			for s := range n {
				want = append(want, flight(rec.Epoch, uint64(s), s))
			}
			requireFlights(t, got, want...)
		})
	}
}

// A slot below a published cut that no bucket can serve is a typed error
// naming the slot; iteration stops there.
func TestReaderDataUnavailable(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 8)
	for s := range 3 {
		e.putFlight(rec, uint64(s), s, 0, 1, 2)
	}
	e.putFlight(rec, 3, 3, 1, 2)
	e.putFlight(rec, 4, 4, 0, 1, 2)
	bad := wire.EncodeFlight(star, rec.Epoch, 3, payload(3))
	bad[40] ^= 1
	e.put(0, rec, 3, bad)
	e.hooks[1].setRead(func(ctx context.Context, key string, next func() ([]byte, error)) ([]byte, error) {
		if slotOf(key) == 3 {
			return nil, errZoneDown
		}
		return next()
	})
	require.NoError(t, e.mems[2].Delete(bounded(t), e.key(rec, 3)))
	e.publish(rec, 5)

	got, err := readAll(t, e.reader(), chain.Position{})
	requireFlights(t, got, flight(rec.Epoch, 0, 0), flight(rec.Epoch, 1, 1), flight(rec.Epoch, 2, 2))
	require.ErrorIs(t, err, chain.ErrDataUnavailable)
	require.ErrorIs(t, err, wire.ErrCorrupt)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	var de *chain.DataUnavailableError
	require.ErrorAs(t, err, &de)
	require.Equal(t, uint64(3), de.Slot)
	require.Equal(t, rec.Epoch, de.Epoch)

	_, err = e.reader().Read(bounded(t), star, chain.Position{Epoch: rec.Epoch, Slot: 3})
	require.ErrorAs(t, err, &de)
}

func TestReaderTrimmed(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 8)
	e.writeAll(rec, 0, 6)
	e.publish(rec, 6)
	_, err := e.minter.Advance(bounded(t), star, rec.Epoch, epoch.Cursors{Checkpoint: 4, Trimmed: 3, Rewritten: 3})
	require.NoError(t, err)
	for s := range 3 {
		for _, b := range e.mems {
			require.NoError(t, b.Delete(bounded(t), e.key(rec, uint64(s))))
		}
	}
	r := e.reader()
	got, err := readAll(t, r, chain.Position{})
	require.NoError(t, err)
	requireFlights(t, got, flight(rec.Epoch, 3, 3), flight(rec.Epoch, 4, 4), flight(rec.Epoch, 5, 5))
	_, err = r.Read(bounded(t), star, chain.Position{Epoch: rec.Epoch, Slot: 1})
	require.ErrorIs(t, err, cutline.ErrTrimmed)
}

func TestRead(t *testing.T) {
	e := newEnv(t, 3)
	ctx := bounded(t)
	e1 := e.mint(2, 8)
	e.writeAll(e1, 0, 4)
	e.publish(e1, 3) // slot 3 is past the cut (garbage)
	e2 := e.mint(2, 8)
	e.writeAll(e2, 10, 13)
	e.putFlight(e2, 4, 14, 0, 1, 2) // after a hole at slot 3
	r := e.reader()

	p, err := r.Read(ctx, star, chain.Position{Epoch: e1.Epoch, Slot: 2})
	require.NoError(t, err)
	require.Equal(t, payload(2), p)
	_, err = r.Read(ctx, star, chain.Position{Epoch: e1.Epoch, Slot: 3})
	require.ErrorIs(t, err, chain.ErrNotCommitted)

	p, err = r.Read(ctx, star, chain.Position{Epoch: e2.Epoch, Slot: 1})
	require.NoError(t, err)
	require.Equal(t, payload(11), p)
	_, err = r.Read(ctx, star, chain.Position{Epoch: e2.Epoch, Slot: 3})
	require.ErrorIs(t, err, chain.ErrNotCommitted)
	_, err = r.Read(ctx, star, chain.Position{Epoch: e2.Epoch, Slot: 4})
	require.ErrorIs(t, err, chain.ErrNotCommitted, "a committed slot after a hole is not part of the chain")

	_, err = r.Read(ctx, star, chain.Position{Epoch: 99, Slot: 0})
	require.ErrorIs(t, err, chain.ErrNotCommitted)
	require.ErrorIs(t, err, epoch.ErrNoRecord)

	_, err = r.Read(ctx, "bad/star", chain.Position{Epoch: 1})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	var failed error
	for _, err := range r.Flights(ctx, "bad/star", chain.Position{}) {
		failed = err
	}
	require.ErrorIs(t, failed, cutline.ErrInvalid)
}

func TestReaderUnknownZone(t *testing.T) {
	e := newEnv(t, 3)
	rec := e.mint(2, 8)
	e.writeAll(rec, 0, 1)
	r, err := chain.NewReader(e.minter, chain.MustZones(e.buckets[:2]...), chain.ReaderOptions{})
	require.NoError(t, err)
	_, err = readAll(t, r, chain.Position{})
	var ce *cutline.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "buckets[2]", ce.Field)
}

func TestNewReaderValidation(t *testing.T) {
	e := newEnv(t, 1)
	var ce *cutline.ConfigError
	_, err := chain.NewReader(nil, chain.MustZones(e.buckets...), chain.ReaderOptions{})
	require.ErrorAs(t, err, &ce)
	_, err = chain.NewReader(e.minter, nil, chain.ReaderOptions{})
	require.ErrorAs(t, err, &ce)
	_, err = chain.NewReader(e.minter, chain.Zones{"other": e.buckets[0]}, chain.ReaderOptions{})
	require.ErrorAs(t, err, &ce)
	_, err = chain.NewReader(e.minter, chain.MustZones(e.buckets...), chain.ReaderOptions{ReadAhead: -1})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "ReadAhead", ce.Field)
	require.True(t, errors.Is(err, cutline.ErrInvalid))
}

// Read-ahead fetches slots in parallel but costs no extra requests inside a
// fenced epoch, and a bounded number past the end of an open one.
func TestReaderRequestCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 3, func(i int, b objstore.Bucket) objstore.Bucket {
			return latency.Wrap(b, latency.Options{Seed: uint64(i), Default: latency.Uniform(time.Millisecond, 20*time.Millisecond)})
		})
		e1 := e.mint(2, 8)
		e.writeAll(e1, 0, 50)
		e.publish(e1, 50)
		e2 := e.mint(2, 8)
		e.writeAll(e2, 100, 110)
		counts := func() (get, getRange int) {
			for _, fb := range e.faults {
				st := fb.Stats()
				get += st.Calls[fault.OpGet]
				getRange += st.Calls[fault.OpGetRange]
				fb.ResetStats()
			}
			return get, getRange
		}
		counts()
		const ahead = 4
		r, err := chain.NewReader(e.minter, chain.MustZones(e.buckets...), chain.ReaderOptions{ReadAhead: ahead})
		require.NoError(t, err)

		var got []chain.Flight
		for f, err := range r.Flights(context.Background(), star, chain.Position{}) {
			require.NoError(t, err)
			got = append(got, f)
		}
		require.Len(t, got, 60)
		for i, f := range got[:50] {
			require.Equal(t, payload(i), f.Payload)
		}
		for i, f := range got[50:] {
			require.Equal(t, payload(100+i), f.Payload)
		}
		get, getRange := counts()
		// One whole read per flight of the fenced epoch; in the open
		// epoch every copy counted is read whole (identical verified
		// copies only): W to K per slot, for its 10 slots and at most
		// `ahead` read past its end. No header probes.
		require.Equal(t, 0, getRange)
		require.LessOrEqual(t, get, 50+3*(10+ahead))
		require.GreaterOrEqual(t, get, 50+2*10)

		// Stopping early leaves nothing running (goleak checks at exit).
		n := 0
		for _, err := range r.Flights(context.Background(), star, chain.Position{}) {
			require.NoError(t, err)
			if n++; n == 20 {
				break
			}
		}
		get, _ = counts()
		require.LessOrEqual(t, get, 20+ahead)
	})
}

// TestReaderCountsIdenticalCopies is the resumed-epoch schedule seen by a
// reader: X in zone a, Y in zone b (and then c) at slot 0. Headers alone
// show a quorum of flights; only identical copies count toward W, so the
// reader never serves X, and two different flights without a quorum are a
// conflict.
func TestReaderCountsIdenticalCopies(t *testing.T) {
	ctx := bounded(t)
	e := newEnv(t, 3)
	rec := e.mint(2, 4)
	e.putFlight(rec, 0, 100, 0) // X
	e.putFlight(rec, 0, 200, 1) // Y
	_, err := e.reader().Read(ctx, star, chain.Position{Epoch: rec.Epoch, Slot: 0})
	require.ErrorIs(t, err, chain.ErrConflictingFlight)
	var ce *chain.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(0), ce.Slot)
	got, err := readAll(t, e.reader(), chain.Position{})
	require.ErrorIs(t, err, chain.ErrConflictingFlight)
	require.Empty(t, got)

	// With Y in W zones the reader may serve Y (its quorum) or report the
	// conflict, never X.
	e.putFlight(rec, 0, 200, 2)
	for range 20 {
		p, err := e.reader().Read(ctx, star, chain.Position{Epoch: rec.Epoch, Slot: 0})
		if err != nil {
			require.ErrorIs(t, err, chain.ErrConflictingFlight)
			continue
		}
		require.Equal(t, string(payload(200)), string(p))
	}

	// A copy whose body fails its checksum does not count: one intact
	// copy and one corrupt one are not W copies.
	rec2 := e.mint(2, 4)
	e.putFlight(rec2, 0, 1, 0)
	bad := wire.EncodeFlight(star, rec2.Epoch, 0, payload(1))
	bad[len(bad)-1] ^= 1
	e.put(1, rec2, 0, bad)
	_, err = e.reader().Read(ctx, star, chain.Position{Epoch: rec2.Epoch, Slot: 0})
	require.ErrorIs(t, err, chain.ErrNotCommitted)
}

// TestNewZonesRefusesDuplicates: two buckets under one name would let one
// name stand for two stores, or one store count as two zones.
func TestNewZonesRefusesDuplicates(t *testing.T) {
	a, b := memblob.New("zone-a"), memblob.New("zone-a")
	_, err := chain.NewZones(a, b)
	require.ErrorIs(t, err, cutline.ErrInvalid)
	var ce *cutline.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "zones[1]", ce.Field)
	_, err = chain.NewZones(a, nil)
	require.ErrorIs(t, err, cutline.ErrInvalid)
	z, err := chain.NewZones(a, memblob.New("zone-b"))
	require.NoError(t, err)
	require.Len(t, z, 2)
	require.Panics(t, func() { chain.MustZones(a, b) })
}

// TestKeysTooLong: a prefix whose segments are each valid but that leaves
// no room for the longest star's slot keys is refused when the epoch is
// minted (the prefix is a constant of the epoch), with the key error
// reachable.
func TestKeysTooLong(t *testing.T) {
	long := strings.TrimSuffix(strings.Repeat(strings.Repeat("p", 60)+"/", 20), "/")
	err := wire.Keys{Prefix: long}.Validate()
	require.ErrorIs(t, err, cutline.ErrInvalid)
	require.ErrorIs(t, err, objstore.ErrInvalidKey, "the cause is not flattened into text")
	e := newEnv(t, 3)
	c := e.constants(2, 4)
	c.Prefix = long
	_, err = e.minter.Mint(bounded(t), star, c)
	require.ErrorIs(t, err, objstore.ErrInvalidKey)
	var ce *cutline.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "prefix", ce.Field)
}

// TestKeysFollowTheRecord: every party lays out an epoch's keys from its
// record, so a reader and a fencer cannot look for the slots anywhere else
// than where its writer put them.
func TestKeysFollowTheRecord(t *testing.T) {
	ctx := bounded(t)
	e := newEnv(t, 3)
	rec := e.mint(2, 4)
	require.Equal(t, e.keys, wire.KeysOf(rec))
	w := e.writer(rec, chain.WriterOptions{})
	_, err := w.Append(ctx, payload(0))
	require.NoError(t, err)
	require.NoError(t, w.Close(ctx)) // every zone's attempt has ended
	_, err = e.mems[0].Get(ctx, e.keys.Slot(star, rec.Epoch, 0))
	require.NoError(t, err, "the flight is at the record's prefix")
	got, err := readAll(t, e.reader(), chain.Position{})
	require.NoError(t, err)
	requireFlights(t, got, flight(rec.Epoch, 0, 0))
}
