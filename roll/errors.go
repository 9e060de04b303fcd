package roll

import "errors"

// Errors of the Roller.
var (
	// ErrRollerClosed: Append after Close, or an append the roller could
	// not finish before Close gave up.
	ErrRollerClosed = errors.New("roll: roller closed")
	// ErrDropped: Options.Republish refused to republish a pooled
	// append. It was never acknowledged anywhere (it lay at or past the
	// old epoch's cut) and is not placed in the new one.
	ErrDropped = errors.New("roll: append dropped instead of republished")
)
