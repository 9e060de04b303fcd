package fence

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/metastore"
)

// heldStore holds its first transaction until open is closed, after
// telling held: a fencer over it has computed its cut and is publishing.
type heldStore struct {
	metastore.Store
	once       sync.Once
	held, open chan struct{}
}

func (s *heldStore) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	s.once.Do(func() {
		close(s.held)
		select {
		case <-s.open:
		case <-ctx.Done():
		}
	})
	return s.Store.Txn(ctx, t)
}

// TestRacingPublication: two fencers race on one epoch, and the slower one
// publishes while the record moves on under it. It has computed the cut
// and is publishing when the faster one publishes the same cut and the
// epoch is settled. Its publication must not move the record back: a
// compare-and-set of the revision it read fails, it reads the record
// again, finds the cut published and writes nothing. A plain put would
// write the fenced record over the settled one (guarantee 6: records move
// only forward) with the checkpoint it read.
func TestRacingPublication(t *testing.T) { racingPublication(t) }

func racingPublication(t testing.TB) {
	ctx, cancel := context.WithTimeout(t.Context(), failfast.Bound)
	defer cancel()
	e := newEnv(t, 3, 2, 4)
	e.layout(repeatRow("F F F", 6)...)
	hs := &heldStore{Store: e.store, held: make(chan struct{}), open: make(chan struct{})}
	slowMinter, err := epoch.NewMinter(hs, epoch.Options{})
	require.NoError(t, err)
	slow, err := New(slowMinter, e.buckets(), Options{Identity: "slow"})
	require.NoError(t, err)
	done := make(chan error, 1)
	var slowCut uint64
	go func() {
		var err error
		slowCut, err = slow.Fence(ctx, star, e.rec.Epoch)
		done <- err
	}()
	select {
	case <-hs.held:
	case err := <-done:
		t.Fatalf("the slow fencer returned (%v) without publishing", err)
	case <-ctx.Done():
		t.Fatalf("the slow fencer never published")
	}

	cut, err := e.fencer(Options{Identity: "fast"}).Fence(ctx, star, e.rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(6), cut)
	settled, err := e.minter.MarkSettled(ctx, star, e.rec.Epoch)
	require.NoError(t, err)
	close(hs.open)
	select {
	case err = <-done:
	case <-ctx.Done():
		t.Fatalf("the slow fencer did not return once released")
	}
	require.NoError(t, err)
	require.Equal(t, cut, slowCut, "both fencers return the one cut")

	rec := e.record()
	require.Equal(t, epoch.StateSettled, rec.State, "the slow publication moved the settled record back (guarantee 6)")
	require.Equal(t, cut, rec.Cut)
	require.Equal(t, settled.Cursors, rec.Cursors, "the slow publication moved the cursors back (guarantee 6)")
	require.Equal(t, settled.Revision, rec.Revision, "the slow publication wrote over the settled record")
	e.checkCut(cut)
}
