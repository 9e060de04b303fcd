package roll

import (
	"context"
	"log/slog"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
)

// Options configures a Roller. The zero value works.
type Options struct {
	// Writer configures each epoch's chain.Writer.
	Writer chain.WriterOptions
	// RollOnHalt: when the writer halts because its epoch was fenced, roll
	// in process (mint, fence, republish) instead of failing the appends
	// at or past the cut with the writer's *chain.FencedError. Set it when
	// the host still owns the chain's streams (nobody took them over): a
	// fence it did not ask for then only costs a delayed acknowledgement.
	RollOnHalt bool
	// Backoff times the attempts of a roll step that failed (a fence that
	// is undecided, an unreachable metastore). Zero fields mean a fixed
	// 100ms (a zero Max becomes at least Min); each is at most
	// clock.MaxBackoff.
	Backoff clock.Backoff
	// Clock drives retries. Nil means the wall clock.
	Clock clock.Clock
	// Logger receives rolls at info level. Nil discards.
	Logger *slog.Logger
	// Republish, when set, is called in every roll (planned, or after a halt)
	// once the old epoch is fenced and settled and before anything is placed
	// in the new epoch next. payloads are the pooled appends about to be
	// republished into next, in order. It returns one error per payload: nil
	// republishes that append, an error fails it (its Future's Wait returns an
	// error wrapping ErrDropped and the returned error; the append is certainly
	// not acknowledged anywhere: it lay at or past the old cut). A non-nil
	// second result fails the step, which is retried with Backoff until it
	// succeeds or the roller ends; next is not written before it succeeds.
	//
	// The hook must not modify payloads. It runs on the roller's own
	// goroutine: appends submitted meanwhile wait for the roll.
	Republish func(ctx context.Context, next *epoch.Record, payloads [][]byte) ([]error, error)
	// Admit, when set, is asked by Submit, right before it places payload
	// in the current writer, whether the payload may still be appended; an
	// error fails the Submit with it and places nothing. With Republish it
	// lets a host withdraw a payload's right to the chain at a roll: what
	// was pooled passes Republish, what is submitted after the roll passes
	// Admit. It runs with the roller's submission token held: it must be
	// quick and must not call the roller.
	Admit func(payload []byte) error
}
