package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/lease"
)

// An Open of a stream the star holds, while that stream departs, reads
// the tenure under the star's lock: the race detector sees no race, and
// the answer is ErrHeld or a deferral while it departs (or, once it has
// left, the stream opened again).
func TestOpenWhileDeparting(t *testing.T) {
	env := cutlinetest.NewMem(t, 3)
	p := env.Party("star-a")
	sess, err := env.Store.NewSession(bounded(t), time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	s, err := lease.Start(bounded(t), lease.Config{Star: "star-a", Store: env.Store, Session: sess, Minter: p.Minter,
		Settler: p.Settler, Index: p.Refs, Constants: env.Constants(2, 8)}, lease.Options{})
	require.NoError(t, err)
	defer s.Abort()
	for i := range 20 {
		stream := "s" + string(rune('a'+i))
		_, err := s.Open(bounded(t), stream, lease.OpenOptions{})
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := s.Finish(bounded(t), stream, lease.ReasonHandoff); err != nil && !errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("finish %s: %v", stream, err)
			}
		})
		wg.Go(func() {
			for range 50 {
				_, err := s.Open(bounded(t), stream, lease.OpenOptions{})
				if err == nil {
					return
				}
				if !errors.Is(err, lease.ErrHeld) && !errors.Is(err, lease.ErrDeferred) {
					t.Errorf("open %s while it departs: %v", stream, err)
					return
				}
			}
		})
		wg.Wait()
	}
	require.NoError(t, s.Close(bounded(t)))
}
