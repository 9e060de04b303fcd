package linearize

import (
	"context"
	"errors"
	"fmt"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/settle"
)

// ErrInconsistent marks a read that found the index and the chain
// disagreeing (a ref that does not continue its stream, a flight that does
// not hold the record its ref claims). It is no transient failure: a test
// fails on it.
var ErrInconsistent = errors.New("linearize: the stream is inconsistent")

// readTries is how many times ReadStream reads one flight before it
// gives up.
const readTries = 3

// ReadStream reads stream back as a consumer does: its refs from the
// coverage index, in offset order, and each ref's flight through the
// chain reader (tried up to three times, as a consumer retries a read a
// zone failed). The flights are cutlinetest.Record payloads, one record
// per flight. It returns the records' ids in offset order: the stream's
// log. A read that cannot finish (a zone or the metastore does not
// answer) returns the error; one that finds the refs or the flights
// inconsistent returns an error matching ErrInconsistent.
//
// Refs are only ever added, in offset order, and never rewritten, so the
// refs listed are the stream's prefix at the moment the listing ended,
// which is where the read takes effect.
func ReadStream(ctx context.Context, refs *settle.RefIndex, reader *chain.Reader, stream string) ([]string, error) {
	var ids []string
	var next uint64
	for r, err := range refs.Refs(ctx, stream) {
		if err != nil {
			return nil, fmt.Errorf("the refs of %s: %w", stream, err)
		}
		if r.Offset != next || r.Count != 1 {
			return nil, fmt.Errorf("%w: %s: a ref covers [%d, %d) where offset %d is next, one record per flight",
				ErrInconsistent, stream, r.Offset, r.Offset+r.Count, next)
		}
		payload, err := reader.Read(ctx, r.Star, r.Position())
		for try := 1; err != nil && try < readTries && ctx.Err() == nil; try++ {
			payload, err = reader.Read(ctx, r.Star, r.Position())
		}
		if err != nil {
			return nil, fmt.Errorf("%s offset %d at %s/%v: %w", stream, r.Offset, r.Star, r.Position(), err)
		}
		s, off, id, err := cutlinetest.ParseRecord(payload)
		if err != nil || s != stream || off != r.Offset {
			return nil, fmt.Errorf("%w: %s offset %d: the flight at %s/%v holds %q (%v)",
				ErrInconsistent, stream, r.Offset, r.Star, r.Position(), payload, err)
		}
		ids = append(ids, id)
		next++
	}
	return ids, nil
}
