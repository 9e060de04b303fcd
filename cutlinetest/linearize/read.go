package linearize

import (
	"context"
	"errors"
	"fmt"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// ErrInconsistent marks a read that found the index and the chain
// disagreeing (a ref that does not continue its stream, a flight that does
// not hold the record its ref claims). It is no transient failure: a test
// fails on it.
var ErrInconsistent = errkind.New(cutline.ErrCorrupt, "linearize: the stream is inconsistent")

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
// which is where the read takes effect. It reads flights only, and from
// offset 0: once compaction may trim flights or retention may move the
// stream's start, read with ReadFrom.
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

// ReadFrom reads stream from offset from as a consumer does through a
// settle.StreamReader: from flights and segments alike, a chunk per ref.
// The chunks are cutlinetest.Record payloads, one record per flight. It
// returns the records' ids from offset from to the end of the stream's
// coverage, in offset order (none when from is that end). An offset below
// the retention point is a *settle.TrimmedError; chunks that do not hold
// the records their refs claim are an error matching ErrInconsistent; any
// other failure (a zone, the metastore) is returned as it is.
func ReadFrom(ctx context.Context, r *settle.StreamReader, stream string, from uint64) ([]string, error) {
	ids, _, err := readFrom(ctx, r, stream, from, func() {})
	return ids, err
}

// readFrom is ReadFrom; it calls admitted once the first answer is in and
// was not a trimmed one (the read passed the check of from against the
// retention point), and also returns how many chunks came from segments.
func readFrom(ctx context.Context, r *settle.StreamReader, stream string, from uint64, admitted func()) (ids []string, fromSegments int, err error) {
	next := from
	first := true
	for ch, err := range r.Read(ctx, stream, from) {
		if first {
			first = false
			_, trimmed := errors.AsType[*settle.TrimmedError](err)
			switch {
			case err == nil:
				admitted()
			case !trimmed && ch.Star == "" && errors.Is(err, metastore.ErrNotFound):
				// The index found no ref at from: it is the end of the
				// stream's coverage.
				admitted()
				return nil, 0, nil
			}
		}
		if err != nil {
			return nil, fromSegments, fmt.Errorf("%s offset %d: %w", stream, next, err)
		}
		if ch.Offset > next || ch.Offset+ch.Count <= next || ch.Count != 1 {
			return nil, fromSegments, fmt.Errorf("%w: %s: a chunk holds [%d, %d) where offset %d is next, one record per flight",
				ErrInconsistent, stream, ch.Offset, ch.Offset+ch.Count, next)
		}
		s, off, id, err := cutlinetest.ParseRecord(ch.Data)
		if err != nil || s != stream || off != ch.Offset {
			return nil, fromSegments, fmt.Errorf("%w: %s offset %d: its bytes (segment %q) hold %q (%v)",
				ErrInconsistent, stream, ch.Offset, ch.Segment, ch.Data, err)
		}
		if ch.InSegment() {
			fromSegments++
		}
		ids = append(ids, id)
		next++
	}
	return ids, fromSegments, nil
}
