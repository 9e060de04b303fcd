package settle_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/latency"
)

// A writer that keeps appending while a successor fences its epoch: at
// every frontier slot its pipelined flight lands before the fencer's
// poison, and completing a slot wins over killing it, so a walk alone would
// chase it for ever. The fencer kills a slot ahead of it instead; the
// writer halts there, and nothing it acknowledged is at or past the cut.
func TestFenceEndsLiveWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := settletest.NewMem(t, 3)
		slow := func(i int, b objstore.Bucket) objstore.Bucket {
			return latency.Wrap(b, latency.Options{Seed: uint64(i), Default: latency.Uniform(time.Millisecond, 3*time.Millisecond)})
		}
		a := e.NewParty(starA, settletest.PartyOptions{Wrap: slow})
		rec := a.Mint(ctx, starA, e.Constants(2, 16))
		w := a.Writer(rec, chain.WriterOptions{})
		var (
			mu        sync.Mutex
			acked     []uint64
			wg        sync.WaitGroup
			submitErr error
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if i == 100_000 {
					// A fence that cannot stop a live writer: fail with a
					// message instead of appending until the test times out.
					submitErr = fmt.Errorf("the writer never halted: %d appends", i)
					return
				}
				f, err := w.Submit(ctx, record(stream, uint64(i), "x"))
				if err != nil {
					submitErr = err
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if pos, err := f.Wait(ctx); err == nil {
						mu.Lock()
						acked = append(acked, pos.Slot)
						mu.Unlock()
					}
				}()
			}
		}()
		time.Sleep(20 * time.Millisecond) // virtual time: the writer is well under way
		b := e.NewParty(starB, settletest.PartyOptions{Wrap: slow})
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		rep, err := b.Fencer.FenceReport(fctx, starA, rec.Epoch)
		require.NoError(t, err, "a fence must end a live writer's epoch")
		require.Positive(t, rep.Barriers, "the fence killed a slot ahead of the writer")
		<-w.Halted()
		wg.Wait()
		w.Abort()
		require.ErrorIs(t, submitErr, chain.ErrFenced, "the writer stops at the dead slot")
		require.NotEmpty(t, acked)
		for _, s := range acked {
			require.Less(t, s, rep.Cut, "acknowledged slot %d at or past the cut", s)
		}
		b.Env.On(t).VerifyEpoch(starA, rec.Epoch, acked)
	})
}
