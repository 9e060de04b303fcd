package epoch

import (
	"context"
	"sync/atomic"
)

// claimToken is the single-use right to write an epoch, made by Mint.
type claimToken struct {
	minter *Minter
	taken  atomic.Bool
}

// Claim is the right to write one epoch, taken once from the record Mint
// returned. Only the mint that created an epoch may write it, and nothing
// resumes an epoch: a record read back with Get or Epochs (after a restart,
// say) carries no claim, so a second writer on an epoch cannot be made.
// chain.NewWriter takes the claim; hosts rarely call Claim themselves.
type Claim struct {
	rec    *Record
	minter *Minter
}

// Claim takes the right to write the epoch. It returns ErrNotMinted for a
// record that Mint did not return in this process, and ErrClaimed when the
// record (or a copy of it) was claimed before.
func (r *Record) Claim() (*Claim, error) {
	if r == nil || r.claim == nil {
		return nil, ErrNotMinted
	}
	if !r.claim.taken.CompareAndSwap(false, true) {
		return nil, ErrClaimed
	}
	rec := *r
	rec.Constants.Buckets = append([]string(nil), r.Constants.Buckets...)
	return &Claim{rec: &rec, minter: r.claim.minter}, nil
}

// Record returns the minted record the claim was taken from.
func (c *Claim) Record() *Record { return c.rec }

// Advance moves the epoch's checkpoint forward to checkpoint, keeping the
// other cursors. The caller must know that every slot below it is
// acknowledged and covered by the host's index: chain.Writer.Checkpoint
// checks the first against its release point. Once the epoch is fenced the
// checkpoint may not pass the cut (ErrCursorAhead); moving it backwards is
// ErrCursorRegression.
func (c *Claim) Advance(ctx context.Context, checkpoint uint64) (*Record, error) {
	return c.minter.advance(ctx, c.rec.Star, c.rec.Epoch, func(cs Cursors) Cursors {
		cs.Checkpoint = checkpoint
		return cs
	}, true)
}
