package takeover_test

import (
	"context"
	"fmt"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
)

// The hosts are cutlinetest's reference host (StartHost over a
// chain.Writer, StartRoller over a roll.Roller): it places each record
// at the stream's next offset, submits it pipelined, answers the producer
// in slot order and, in an absorb loop, covers the acknowledged records in
// the RefIndex and advances the epoch's checkpoint, recording what the
// producer saw in a History for cutlinetest.Check. A cover or checkpoint
// the metastore refuses is recorded and retried at the next absorb (or
// with Flush).

// maxRecords bounds what a producer sends; the tests stop it long before.
const maxRecords = 5000

// produce submits records <prefix>0, <prefix>1, … through h from a
// goroutine, one per token on credit (as fast as h takes them when credit
// is nil), until ctx ends or h refuses one. The channel it returns is
// closed when it stops.
func produce(ctx context.Context, h *cutlinetest.Host, prefix string, credit <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range maxRecords {
			if credit != nil {
				select {
				case <-credit:
				case <-ctx.Done():
					return
				}
			}
			if h.Submit(ctx, fmt.Sprint(prefix, i)) != nil {
				return // stopped, or the writer is gone
			}
		}
	}()
	return done
}

// failure is a record a host did not acknowledge, and why.
type failure struct {
	id  string
	err error
}

// outcome is what a host's producer saw, read back from the History: the
// records submitted in slot order, where each acknowledged one lies, and
// the failures in the order answered.
type outcome struct {
	submitted []string
	acked     map[string]chain.Position
	failed    []failure
}

func outcomeOf(hist *cutlinetest.History, host string) outcome {
	o := outcome{acked: map[string]chain.Position{}}
	for _, ev := range hist.Events() {
		if ev.Host != host {
			continue
		}
		switch ev.Op {
		case cutlinetest.Submitted:
			o.submitted = append(o.submitted, ev.ID)
		case cutlinetest.Acked:
			o.acked[ev.ID] = ev.Pos
		case cutlinetest.Failed:
			o.failed = append(o.failed, failure{ev.ID, ev.Err})
		}
	}
	return o
}
