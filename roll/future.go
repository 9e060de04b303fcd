package roll

import (
	"context"

	"github.com/cutline/cutline/chain"
)

// Future is the pending outcome of one Roller append: what this layer adds
// is the final position across rolls. The append starts in the current
// epoch's chain.Future, which a roll may cut off; the Roller then either
// acknowledges it where it landed below the cut or republishes it into the
// next epoch's first slots, so Wait returns the one position where the
// payload is durable, whichever epoch that is.
type Future struct {
	payload []byte
	wf      *chain.Future // nil while not placed in any epoch
	ep      uint64        // the epoch wf belongs to
	done    chan struct{}
	pos     chain.Position
	err     error
}

// Done is closed when the append is acknowledged or has failed.
func (a *Future) Done() <-chan struct{} { return a.done }

// Wait blocks until the append is decided or ctx ends (which only stops
// the wait).
func (a *Future) Wait(ctx context.Context) (chain.Position, error) {
	select {
	case <-a.done:
		return a.pos, a.err
	case <-ctx.Done():
		return chain.Position{}, ctx.Err()
	}
}

func (a *Future) resolve(pos chain.Position, err error) {
	a.pos, a.err = pos, err
	close(a.done)
}
