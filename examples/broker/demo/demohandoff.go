package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cutline/cutline/authority"
)

// handoff is the demonstration's next-to-last act: an operator hands the
// grant from the successor to the third node, whose producer window is
// another, and the producer sends every record once more, as a client
// that lost its answers would. Each is answered with its first
// acknowledgement or refused as too old to judge; none is appended
// again. It returns the new holder.
func (d *demo) handoff(ctx context.Context) (*demoNode, error) {
	var target *demoNode
	for _, n := range d.nodes {
		if n != d.zombie && n != d.successor {
			target = n
		}
	}
	from := d.successor
	d.rec.note(time.Now(), "operator", "hands the grant from %s (producer window %d) to %s (producer window %d)",
		from.name, from.Config.Producers.Window, target.name, target.Config.Producers.Window)
	tick := time.NewTicker(demoPoll)
	defer tick.Stop()
	for {
		// The controller refuses a handoff while it is still settling the
		// last change of the grant; it is asked again until it takes it.
		drv := d.ctl.Driver()
		if drv != nil && drv.Step(ctx, authority.HandoffRequest{Target: target.name}) == nil {
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("handing the grant to %s: %w", target.name, ctx.Err())
		}
	}
	if _, err := d.rec.wait(ctx, target.name+"'s grant", func(e event) bool {
		return e.grant != nil && e.grant.Phase == authority.Granted && e.grant.Holder == target.name
	}); err != nil {
		return nil, err
	}
	r, err := d.prod.resend(ctx, seqRange(0, uint64(d.cfg.records)), d.cfg.inflight)
	if err != nil {
		return nil, err
	}
	d.rec.note(time.Now(), "producer", "sent all %d records again", d.cfg.records)
	d.findings = append(d.findings, fmt.Sprintf("after the handoff from %s (producer window %d) to %s (window %d), the producer sent all %d records again: "+
		"%d answered as duplicates with their first acknowledgements, %d refused as too old to judge (409), 0 appended again",
		from.name, from.Config.Producers.Window, target.name, target.Config.Producers.Window, d.cfg.records, r.duplicates, r.tooOld))
	return target, nil
}
