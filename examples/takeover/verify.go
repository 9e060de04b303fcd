package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// verify reads the stream back as a fresh reader would, through the
// RefIndex and chain.Reader, and compares it with what the producer saw
// acknowledged. It also reads both chains flight by flight, to show that
// the chains themselves serve every record once: the zombie's flights past
// the cut are not part of them.
//
// It prints its findings and returns the verdict line, and an error when
// anything did not hold.
func (d *demo) verify(ctx context.Context, p *producer, epA, cut uint64) (string, error) {
	fmt.Fprintf(d.out, "\nverification: read the stream back through the RefIndex and chain.Reader (each ref → flight → record)\n")
	minter, err := epoch.NewMinter(d.be.store, epoch.Options{})
	if err != nil {
		return "", err
	}
	refs, err := settle.NewRefIndex(d.be.store, "", locate)
	if err != nil {
		return "", err
	}
	zones := make([]objstore.Bucket, len(d.metersV))
	for i, m := range d.metersV {
		zones[i] = m
	}
	zoneSet, err := chain.NewZones(zones...)
	if err != nil {
		return "", err
	}
	// One slot at a time: read-ahead past the end of star-b's open epoch
	// would send as many requests as fit in before the end is seen, a
	// count that depends on timing.
	reader, err := chain.NewReader(minter, zoneSet, chain.ReaderOptions{ReadAhead: 1})
	if err != nil {
		return "", err
	}
	var problems []string
	stored, err := readStream(ctx, refs, reader, stream)
	if err != nil {
		// Nothing can be compared; everything acknowledged counts as lost.
		problems = append(problems, err.Error())
		stored = nil
	}
	count := make(map[uint64]int)
	at := make(map[uint64]uint64)
	for _, s := range stored {
		r := s.rec
		switch {
		case r.Producer != p.id:
			problems = append(problems, fmt.Sprintf("offset %d holds a record of unknown producer %q", r.Offset, r.Producer))
			continue
		case !bytes.Equal(r.Data, p.data(r.Seq)):
			problems = append(problems, fmt.Sprintf("offset %d: sequence %d holds wrong data", r.Offset, r.Seq))
			continue
		case s.ref.Star == starA && s.ref.Epoch == epA && s.ref.Slot >= cut:
			problems = append(problems, fmt.Sprintf("offset %d is served from %s/%d/%d, past the cut %d", r.Offset, starA, epA, s.ref.Slot, cut))
		}
		count[r.Seq]++
		at[r.Seq] = r.Offset
	}
	lost, duplicated := 0, 0
	for seq, off := range p.acked {
		if got, ok := at[seq]; !ok || got != off {
			lost++
		}
	}
	for _, n := range count {
		duplicated += n - 1
	}
	if len(stored) > 0 {
		fmt.Fprintf(d.out, "  offsets 0–%d without a gap; each record decoded from its flight and compared with what was acknowledged\n", len(stored)-1)
	}

	// The chains, flight by flight.
	flights := 0
	inChains := make(map[uint64]int)
	for _, star := range []string{starA, starB} {
		for f, err := range reader.Flights(ctx, star, chain.Position{}) {
			if err != nil {
				problems = append(problems, fmt.Sprintf("read chain %s: %v", star, err))
				break
			}
			r, err := decodeRecord(f.Payload)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s/%v: %v", star, f.Position, err))
				continue
			}
			flights++
			inChains[r.Seq]++
		}
	}
	chainDups := 0
	for _, n := range inChains {
		chainDups += n - 1
	}
	fmt.Fprintf(d.out, "  the chains of %s and %s serve %d flights; records in more than one flight: %d\n", starA, starB, flights, chainDups)
	if chainDups > 0 || flights != len(stored) {
		problems = append(problems, fmt.Sprintf("the chains serve %d flights (%d duplicates) for %d records", flights, chainDups, len(stored)))
	}

	// The six guarantees, checked by cutlinetest over the raw zones and
	// the store (unmetered: the request table shows the demo's own reads).
	vs := cutlinetest.Check(ctx, cutlinetest.Run{History: d.history(p, stored), Store: d.be.store, Zones: d.be.zones, Locate: locate})
	fmt.Fprintf(d.out, "  cutline's six guarantees (cutlinetest.Check: every zone read directly, every fenced epoch fenced again, the store's history replayed): %d violations\n", len(vs))
	for _, v := range vs {
		problems = append(problems, v.Error())
	}

	verdict := fmt.Sprintf("acknowledged %d, readable %d, lost %d, duplicated %d", len(p.acked), len(stored), lost, duplicated)
	if lost > 0 || duplicated > 0 || len(stored) != len(p.acked) {
		problems = append(problems, verdict)
	}
	for _, pr := range problems {
		fmt.Fprintf(d.out, "  FAILED: %s\n", pr)
	}
	if len(problems) > 0 {
		return verdict, fmt.Errorf("verification failed: %s", problems[0])
	}
	return verdict, nil
}

// history is what the producer saw, as cutlinetest.Check reads it: each
// acknowledged sequence, submitted as the record the broker made of it at
// its acknowledged offset. The producer learns offsets, not slots: an
// acknowledgement is placed where the RefIndex serves its offset, which
// Check then reads in the zones. A sequence whose offset the index does
// not serve is recorded as submitted only; it is counted as lost above.
func (d *demo) history(p *producer, stored []storedRecord) *cutlinetest.History {
	at := make(map[uint64]settle.Ref, len(stored))
	for _, s := range stored {
		at[s.ref.Offset] = s.ref
	}
	var h cutlinetest.History
	for _, seq := range slices.Sorted(maps.Keys(p.acked)) {
		off := p.acked[seq]
		id := fmt.Sprintf("%s/%d", p.id, seq)
		payload := record{Stream: stream, Offset: off, Producer: p.id, Seq: seq, Data: p.data(seq)}.encode()
		r, ok := at[off]
		of := h.Add(cutlinetest.Event{Op: cutlinetest.Submitted, Star: r.Star, ID: id, Payload: payload})
		if ok {
			h.Add(cutlinetest.Event{Op: cutlinetest.Acked, Star: r.Star, ID: id, Of: of, Pos: r.Position()})
		}
	}
	return &h
}
