package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/examples/broker/node"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// demoLifecycleEvery is the interval of the holder's lifecycle passes in
// the demonstration's last act (a broker's default is a minute).
const demoLifecycleEvery = 250 * time.Millisecond

// compaction is the demonstration's last act before the verification:
// the holder's lifecycle passes run (lifecycle.go) while a consumer reads
// the stream over and over through its API. The passes settle the epoch
// the handoff left open, rewrite the flights of every epoch into
// segments and trim them; each read must still hold every acknowledged
// record exactly once, at its offset.
func (d *demo) compaction(ctx context.Context, holder *demoNode) error {
	before, err := d.storage(ctx)
	if err != nil {
		return err
	}
	d.rec.note(time.Now(), "storage", "before compaction: %s", before)
	acks := d.prod.acknowledgements()
	rctx, stopReads := context.WithCancel(ctx)
	defer stopReads()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		reads int
		rerr  error
	)
	// afterPasses is closed once the passes are done: the read running
	// then is the last.
	afterPasses := make(chan struct{})
	wg.Go(func() {
		for {
			got, err := d.prod.read(rctx, holder.name)
			if err == nil {
				err = d.checkRead(got, acks)
			}
			mu.Lock()
			if err != nil && rctx.Err() == nil {
				rerr = err
			}
			if err == nil {
				reads++
			}
			mu.Unlock()
			select {
			case <-afterPasses:
				return
			default:
			}
			if err != nil || rctx.Err() != nil {
				return
			}
		}
	})
	d.rec.note(time.Now(), "demo", "%s runs its lifecycle passes every %v while the consumer reads %q through its API, again and again", holder.name, demoLifecycleEvery, demoStream)
	// Two passes: the first does all there is to do (the demonstration's
	// epochs are far below a pass's bounds), the second finds nothing
	// left but the collection of what the first left behind.
	from := holder.LifecyclePasses.Load()
	holder.StartLifecycle(node.LifecycleConfig{Interval: demoLifecycleEvery})
	tick := time.NewTicker(demoPoll)
	defer tick.Stop()
	for holder.LifecyclePasses.Load() < from+2 && ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	holder.StopLifecycle()
	close(afterPasses)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("waiting for %s's lifecycle passes: %w", holder.name, err)
	}
	if rerr != nil {
		return fmt.Errorf("%w: a read while the stream was compacted: %v", errDidNotHold, rerr)
	}
	after, err := d.storage(ctx)
	if err != nil {
		return err
	}
	d.rec.note(time.Now(), "storage", "after: %s", after)
	d.rec.note(time.Now(), "consumer", "read %q whole %d times through %s's API while it was compacted and trimmed: each read held all %d acknowledged records, once each",
		demoStream, reads, holder.name, len(acks))
	if after.flights() > 0 || after.inSegments != after.refs {
		return fmt.Errorf("%w: after compaction %d flight copies below a cut are left, %d of %d refs are read from segments", errDidNotHold, after.flights(), after.inSegments, after.refs)
	}
	d.findings = append(d.findings, fmt.Sprintf("compaction rewrote the stream's %d flights into %d segment objects and trimmed them: the zones went from %d objects to %d; the stream was read %d times meanwhile, every acknowledged record once each time",
		before.refs, after.segments()/len(after.zones), before.objects(), after.objects(), reads))
	return nil
}

// checkRead checks a read of the whole stream: every acknowledged record,
// once, at the offset it was acknowledged at, and nothing else.
func (d *demo) checkRead(got []node.Consumed, acks map[uint64]acked) error {
	seqOf := d.seqOf()
	seen := map[uint64]bool{}
	for i, r := range got {
		seq, ok := seqOf[string(r.Data)]
		switch {
		case r.Offset != uint64(i):
			return fmt.Errorf("offset %d at position %d", r.Offset, i)
		case !ok:
			return fmt.Errorf("offset %d holds a record nobody sent", r.Offset)
		case seen[seq]:
			return fmt.Errorf("record %d read twice", seq)
		case acks[seq].Offset != r.Offset:
			return fmt.Errorf("record %d at offset %d, acknowledged at %d", seq, r.Offset, acks[seq].Offset)
		}
		seen[seq] = true
	}
	if len(got) != len(acks) {
		return fmt.Errorf("%d records read, %d acknowledged", len(got), len(acks))
	}
	return nil
}

// seqOf maps the data of every record the producer sends to its
// sequence.
func (d *demo) seqOf() map[string]uint64 {
	out := make(map[string]uint64, d.cfg.records)
	for seq := range uint64(d.cfg.records) {
		out[string(d.prod.data(seq))] = seq
	}
	return out
}

// storage is what the zones and the index hold of the run.
type storage struct {
	zones []zoneStorage
	// refs counts the stream's refs, inSegments those whose bytes are in
	// a segment.
	refs, inSegments int
}

// zoneStorage counts one zone's objects by kind: the flights below their
// epoch's cut (what the stream's refs may read), the stray ones at or
// past it (a zombie's late copies, which nothing ever reads), the
// poison, and the segments.
type zoneStorage struct {
	name                            string
	flights, stray, poison, segment int
}

func (s storage) flights() int {
	n := 0
	for _, z := range s.zones {
		n += z.flights
	}
	return n
}

func (s storage) segments() int {
	n := 0
	for _, z := range s.zones {
		n += z.segment
	}
	return n
}

func (s storage) objects() int {
	n := 0
	for _, z := range s.zones {
		n += z.flights + z.stray + z.poison + z.segment
	}
	return n
}

func (s storage) String() string {
	var zs []string
	for _, z := range s.zones {
		line := fmt.Sprintf("%s %d flights", z.name, z.flights)
		if z.stray > 0 {
			line += fmt.Sprintf(" (and %d past a cut)", z.stray)
		}
		zs = append(zs, line+fmt.Sprintf(", %d poison, %d segments", z.poison, z.segment))
	}
	return fmt.Sprintf("%s; index: %d refs, %d of them read from segments", strings.Join(zs, "; "), s.refs, s.inSegments)
}

// storage counts the objects of the run in every zone, and the stream's
// refs.
func (d *demo) storage(ctx context.Context) (storage, error) {
	var s storage
	minter, err := epoch.NewMinter(d.be.Store, epoch.Options{})
	if err != nil {
		return s, err
	}
	cuts := map[string]uint64{} // star/epoch → its cut; no slot of an open epoch is past one
	cut := func(star string, ep uint64) (uint64, error) {
		id := fmt.Sprintf("%s/%d", star, ep)
		if c, ok := cuts[id]; ok {
			return c, nil
		}
		rec, err := minter.Get(ctx, star, ep)
		if err != nil {
			return 0, err
		}
		c := uint64(math.MaxUint64)
		if rec.Fenced() {
			c = rec.Cut
		}
		cuts[id] = c
		return c, nil
	}
	for _, z := range d.be.Zones {
		zs := zoneStorage{name: z.Name()}
		for o, err := range objstore.All(ctx, z, d.cfg.keyPrefix+"/") {
			if err != nil {
				return s, err
			}
			if strings.Contains(o.Key, "/segments/") {
				zs.segment++
				continue
			}
			data, err := z.Get(ctx, o.Key)
			if errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			if err != nil {
				return s, err
			}
			obj, err := wire.Decode(data)
			switch {
			case err != nil:
				return s, fmt.Errorf("%s %s: %w", z.Name(), o.Key, err)
			case obj.Kind == wire.KindPoison:
				zs.poison++
				continue
			}
			c, err := cut(obj.Star, obj.Epoch)
			if err != nil {
				return s, err
			}
			if obj.Slot >= c {
				zs.stray++
			} else {
				zs.flights++
			}
		}
		s.zones = append(s.zones, zs)
	}
	refs, err := settle.NewRefIndex(d.be.Store, "", node.Locate)
	if err != nil {
		return s, err
	}
	for e, err := range refs.Extents(ctx, demoStream, 0) {
		if err != nil {
			return s, err
		}
		s.refs++
		if e.InSegment() {
			s.inSegments++
		}
	}
	return s, nil
}
