package roll

import (
	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// Errors of the Roller.
var (
	// errClosed: Append after Close, or an append the roller could not
	// finish before Close gave up. It matches cutline.ErrClosed.
	errClosed = errkind.New(cutline.ErrClosed, "roll: roller closed")
	// ErrDropped: Options.Republish refused to republish a pooled
	// append. It was never acknowledged anywhere (it lay at or past the
	// old epoch's cut) and is not placed in the new one.
	ErrDropped = errkind.New(cutline.ErrStale, "roll: append dropped instead of republished")
)
