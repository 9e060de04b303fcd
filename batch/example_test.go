package batch_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A host gathers records of two streams into one flight, acknowledges
// each, and reads them back through its index.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	x := newExampleStar(ctx) // a star on three zones in memory; see below
	star, sess, minter, zones, refs := x.star, x.sess, x.minter, x.zones, x.refs
	for _, s := range []string{"orders", "audit"} {
		must(star.Open(ctx, s, lease.OpenOptions{}))
	}

	// Records gather for up to 5 ms, or until 64 KiB or 100 records.
	p := must(batch.New(star, batch.Options{MaxBytes: 64 << 10, MaxRecords: 100, Linger: 5 * time.Millisecond}))
	var acks []*batch.Ack
	for i := range 3 {
		acks = append(acks, must(p.Add(ctx, "orders", fmt.Appendf(nil, "order %d", i))))
	}
	acks = append(acks, must(p.Add(ctx, "audit", []byte("checked"))))
	for _, a := range acks {
		pos, offset, err := a.Wait(ctx)
		if err != nil {
			panic(err) // a real host retries (see the package documentation)
		}
		fmt.Printf("%s offset %d acknowledged in epoch %d\n", a.Stream(), offset, pos.Epoch)
	}
	if err := p.Close(ctx); err != nil {
		panic(err)
	}
	if err := star.Close(ctx); err != nil {
		panic(err)
	}
	_ = sess.Close(ctx)

	// A reader serves a stream from its refs.
	reader := must(chain.NewReader(minter, zones, chain.ReaderOptions{}))
	for r, err := range refs.Refs(ctx, "orders") {
		if err != nil {
			panic(err)
		}
		payload := must(reader.Read(ctx, r.Star, r.Position()))
		for _, rec := range must(batch.SpanEntries(payload, r.Span())) {
			fmt.Printf("orders[%d] = %s\n", rec.Offset, rec.Data)
		}
	}
	// Output:
	// orders offset 0 acknowledged in epoch 1
	// orders offset 1 acknowledged in epoch 1
	// orders offset 2 acknowledged in epoch 1
	// audit offset 0 acknowledged in epoch 1
	// orders[0] = order 0
	// orders[1] = order 1
	// orders[2] = order 2
}

// A host answers the retry of an idempotent producer with its first
// receipt, and a new holder of the stream rebuilds the table from its
// encoding.
func ExampleDedup() {
	table := must(batch.NewDedup(batch.DedupOptions{Producers: 100, Window: 8}))
	produce := func(producer string, seq uint64) {
		switch r, v := table.Lookup(producer, seq); v {
		case batch.Duplicate:
			fmt.Printf("%s/%d: duplicate of offset %d\n", producer, seq, r.Offset)
		case batch.TooOld:
			fmt.Printf("%s/%d: refused, too old\n", producer, seq)
		default:
			// Append the record; once acknowledged, at the table's next
			// offset, apply it.
			off := table.Next()
			table.Apply(producer, seq, batch.Receipt{Offset: off, Position: chain.Position{Epoch: 1, Slot: off}})
			fmt.Printf("%s/%d: appended at offset %d\n", producer, seq, off)
		}
	}
	for seq := range uint64(10) {
		produce("p", seq)
	}
	produce("p", 9) // a retry
	produce("p", 1) // below the window of 8

	saved := must(table.MarshalBinary())
	successor := must(batch.NewDedup(batch.DedupOptions{Producers: 100, Window: 8}))
	if err := successor.UnmarshalBinary(saved); err != nil {
		panic(err)
	}
	table = successor
	produce("p", 9)
	produce("p", 10)
	// Output:
	// p/0: appended at offset 0
	// p/1: appended at offset 1
	// p/2: appended at offset 2
	// p/3: appended at offset 3
	// p/4: appended at offset 4
	// p/5: appended at offset 5
	// p/6: appended at offset 6
	// p/7: appended at offset 7
	// p/8: appended at offset 8
	// p/9: appended at offset 9
	// p/9: duplicate of offset 9
	// p/1: refused, too old
	// p/9: duplicate of offset 9
	// p/10: appended at offset 10
}

// A holder saves its producer table in the stream's snapshot; the next
// one rebuilds it from there, replaying only the tail, and still knows
// the producer's retries.
func ExampleDedupStore() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	x := newExampleStar(ctx)
	star, minter, zones, refs := x.star, x.minter, x.zones, x.refs
	defer star.Abort()
	must(star.Open(ctx, "orders", lease.OpenOptions{}))

	// Records are "producer sequence".
	extract := func(_ string, _ uint64, rec []byte) (producer string, seq uint64, err error) {
		_, err = fmt.Sscanf(string(rec), "%s %d", &producer, &seq)
		return producer, seq, err
	}
	chunks := must(settle.NewStreamReader(minter, zones, refs, settle.StreamReaderOptions{}))
	ds := must(batch.NewDedupStore(star, chunks, batch.DedupStoreOptions{Extract: extract}))

	p := must(batch.New(star, batch.Options{}))
	table := must(batch.NewDedup(batch.DedupOptions{}))
	for seq := range uint64(5) {
		a := must(p.Add(ctx, "orders", fmt.Appendf(nil, "p %d", seq)))
		pos, off, err := a.Wait(ctx)
		if err != nil {
			panic(err)
		}
		table.Apply("p", seq, batch.Receipt{Offset: off, Position: pos})
		if seq == 2 {
			if err := ds.Save(ctx, "orders", table); err != nil {
				panic(err)
			}
		}
	}
	// What was acknowledged is covered (a successor's open does it).
	if err := errors.Join(p.Close(ctx), star.Absorb(ctx)); err != nil {
		panic(err)
	}

	rebuilt, rb, err := ds.Rebuild(ctx, "orders", table.Next())
	if err != nil {
		panic(err)
	}
	fmt.Printf("from the snapshot at %d, %d records replayed\n", rb.Snapshot, rb.Replayed)
	r, v := rebuilt.Lookup("p", 4)
	fmt.Printf("p/4: %v of offset %d\n", v, r.Offset)
	// Output:
	// from the snapshot at 3, 2 records replayed
	// p/4: duplicate of offset 4
}

// A host serves producers that retry: each record is appended once,
// a retry is answered with the first receipt, and a retry that carries
// other bytes under the same sequence is refused.
func ExampleDedupAppender() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	x := newExampleStar(ctx)
	defer x.star.Abort()

	// A record is "producer sequence data"; each flight is a bundle of
	// one record.
	encode := func(s batch.Submission, _ uint64) []byte {
		return fmt.Appendf(nil, "%s %d %s", s.Producer, s.Seq, s.Data)
	}
	wrap := func(stream string, off uint64, rec []byte) []byte {
		return must(batch.Encode([]batch.Stream{{Name: stream, Offset: off, Records: [][]byte{rec}}}))
	}
	extract := func(_ string, _ uint64, rec []byte) (producer string, seq uint64, err error) {
		_, err = fmt.Sscanf(string(rec), "%s %d", &producer, &seq)
		return producer, seq, err
	}
	chunks := must(settle.NewStreamReader(x.minter, x.zones, x.refs, settle.StreamReaderOptions{}))
	ds := must(batch.NewDedupStore(x.star, chunks, batch.DedupStoreOptions{Extract: extract}))
	app := must(batch.NewDedupAppender(batch.DedupAppenderConfig{Star: x.star, Store: ds, Encode: encode},
		batch.DedupAppenderOptions{Wrap: wrap}))
	defer app.Close()

	for _, s := range []batch.Submission{
		{Stream: "orders", Producer: "p", Seq: 0, Data: []byte("apple")},
		{Stream: "orders", Producer: "p", Seq: 1, Data: []byte("pear")},
		{Stream: "orders", Producer: "p", Seq: 1, Data: []byte("pear")}, // a retry
		{Stream: "orders", Producer: "p", Seq: 1, Data: []byte("plum")}, // another record, same sequence
	} {
		a, err := app.Append(ctx, s)
		switch {
		case errors.Is(err, batch.ErrPayloadConflict):
			fmt.Printf("p/%d %s: refused, the sequence holds other bytes\n", s.Seq, s.Data)
		case err != nil:
			panic(err)
		case a.Duplicate:
			fmt.Printf("p/%d %s: a duplicate of offset %d\n", s.Seq, s.Data, a.Offset)
		default:
			fmt.Printf("p/%d %s: appended at offset %d\n", s.Seq, s.Data, a.Offset)
		}
	}
	// Output:
	// p/0 apple: appended at offset 0
	// p/1 pear: appended at offset 1
	// p/1 pear: a duplicate of offset 1
	// p/1 plum: refused, the sequence holds other bytes
}

// exampleStar is a star of the examples, broker-1, on three zones in
// memory, with a RefIndex that reads bundles (batch.Locate).
type exampleStar struct {
	star   *lease.Star
	sess   metastore.Session
	minter *epoch.Minter
	zones  chain.Zones
	refs   *settle.RefIndex
}

func newExampleStar(ctx context.Context) exampleStar {
	store := memstore.New(memstore.Options{})
	buckets := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	zones := chain.MustZones(buckets...)
	minter := must(epoch.NewMinter(store, epoch.Options{Identity: "broker-1"}))
	fencer := must(fence.New(minter, zones, fence.Options{Identity: "broker-1"}))
	refs := must(settle.NewRefIndex(store, "", batch.Locate))
	settler := must(settle.New(minter, zones, refs, settle.Options{Fencer: fencer}))
	sess := must(store.NewSession(ctx, 10*time.Second))
	star := must(lease.Start(ctx, lease.Config{
		Star: "broker-1", Store: store, Session: sess, Minter: minter, Settler: settler, Index: refs,
		Constants: epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: 64},
	}, lease.Options{}))
	return exampleStar{star: star, sess: sess, minter: minter, zones: zones, refs: refs}
}
