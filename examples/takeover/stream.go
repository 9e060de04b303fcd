package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/settle"
)

// storedRecord is one record read back through the stream's coverage.
type storedRecord struct {
	ref settle.Ref
	rec record
}

// readStream reads a stream the way a host serves it: every ref of the
// RefIndex, in offset order, names the chain position of a flight; the
// flight is read with chain.Reader and decoded. Offsets must run from 0
// without a gap, and each record must be the one its ref says.
func readStream(ctx context.Context, refs *settle.RefIndex, reader *chain.Reader, stream string) ([]storedRecord, error) {
	var out []storedRecord
	for ref, err := range refs.Refs(ctx, stream) {
		if err != nil {
			return nil, err
		}
		if want := uint64(len(out)); ref.Offset != want || ref.Count != 1 {
			return nil, fmt.Errorf("stream %s: ref %s/%d/%d covers offsets [%d, %d), want offset %d next",
				stream, ref.Star, ref.Epoch, ref.Slot, ref.Offset, ref.Offset+ref.Count, want)
		}
		out = append(out, storedRecord{ref: ref})
	}
	// Reading is I/O bound: a few readers at once.
	const readers = 16
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	next := make(chan int)
	for range readers {
		wg.Go(func() {
			for i := range next {
				s := &out[i]
				payload, err := reader.Read(ctx, s.ref.Star, s.ref.Position())
				if err == nil {
					s.rec, err = decodeRecord(payload)
				}
				if err == nil && (s.rec.Stream != stream || s.rec.Offset != s.ref.Offset) {
					err = fmt.Errorf("flight holds %s offset %d", s.rec.Stream, s.rec.Offset)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("stream %s offset %d at %s/%v: %w", stream, s.ref.Offset, s.ref.Star, s.ref.Position(), err)
						cancel()
					}
					mu.Unlock()
				}
			}
		})
	}
feed:
	for i := range out {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
