package lease

import (
	"context"
)

// What the planted variants of package internal/planted do here; reached
// only in builds with the cutline_planted tag (elsewhere the branches that
// call them are compiled out).

// markFirst is MarkBeforeFlush: it stamps the clean-release mark as land
// does, but before the release flush has run, so that it certifies every
// offset the tenure appended instead of what the index covers. The
// landing goes on with the flush and then finds the mark its own.
func (s *Star) markFirst(ctx context.Context, t *tenure) error {
	stream := t.info.Stream
	s.mu.Lock()
	mark := &Mark{RecordHeader: hdr(releaseKind), Stream: stream, Star: s.cfg.Star, Epoch: t.epoch, Tenure: t.info.Tenure, Next: t.next, Reason: t.reason, At: s.clock.Now().UTC()}
	wrev, lrev := t.writerRev, t.leaseRev
	s.mu.Unlock()
	return s.stampMark(ctx, t, mark, wrev, lrev)
}
