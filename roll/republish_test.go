package roll_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/settletest"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/roll"
)

// stallFlights holds every flight create of epoch ep at slot from or past
// it until the caller gives up (the writer is aborted): those slots stay
// in flight, never committed, while poison and every other object pass.
type stallFlights struct {
	objstore.Bucket
	ep, from uint64
}

func (b *stallFlights) Create(ctx context.Context, key string, data []byte) error {
	if h, err := wire.DecodeHeader(data); err == nil && h.Kind == wire.KindFlight && h.Epoch == b.ep && h.Slot >= b.from {
		<-ctx.Done()
		return ctx.Err()
	}
	return b.Bucket.Create(ctx, key, data)
}

// hookCall is what one call of a Republish hook saw.
type hookCall struct {
	next     *epoch.Record
	payloads []string
	at       time.Time
}

// hookLog records the calls of a Republish hook and answers with answer.
type hookLog struct {
	mu     sync.Mutex
	calls  []hookCall
	answer func(call int, next *epoch.Record, payloads [][]byte) ([]error, error)
}

func (h *hookLog) hook(ctx context.Context, next *epoch.Record, payloads [][]byte) ([]error, error) {
	h.mu.Lock()
	n := len(h.calls)
	c := hookCall{next: next, at: time.Now()}
	for _, p := range payloads {
		c.payloads = append(c.payloads, string(p))
	}
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	if h.answer != nil {
		return h.answer(n, next, payloads)
	}
	return make([]error, len(payloads)), nil
}

func (h *hookLog) seen() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookCall(nil), h.calls...)
}

// tailScenario opens a roller over epoch 1 whose flights from slot 3 on
// never land, appends six records and waits until the first three are
// acknowledged: records 3–5 are the unratified tail a planned roll pools.
type tailScenario struct {
	e    *settletest.Env
	p    *settletest.Party
	r    *roll.Roller
	apps []*roll.Future
	ids  []string
	pay  [][]byte
}

func openTail(t *testing.T, opts roll.Options, stream func(i int) (string, uint64)) *tailScenario {
	t.Helper()
	ctx := context.Background()
	e := settletest.NewMem(t, 3)
	p := e.NewParty("host", settletest.PartyOptions{Wrap: func(i int, b objstore.Bucket) objstore.Bucket {
		return &stallFlights{Bucket: b, ep: 1, from: 3}
	}})
	r, err := roll.Open(ctx, p.Settler, starA, e.Constants(2, 8), opts)
	require.NoError(t, err)
	sc := &tailScenario{e: e, p: p, r: r}
	for i := range 6 {
		s, off := stream(i)
		id := fmt.Sprintf("r%d", i)
		pl := record(s, off, id)
		a, err := r.Submit(ctx, pl)
		require.NoError(t, err)
		sc.apps, sc.ids, sc.pay = append(sc.apps, a), append(sc.ids, id), append(sc.pay, pl)
	}
	for i := range 3 {
		pos, err := sc.apps[i].Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, chain.Position{Epoch: 1, Slot: uint64(i)}, pos)
	}
	return sc
}

func oneStream(i int) (string, uint64) { return stream, uint64(i) }

// The hook sees the new epoch's record and the pooled payloads in order,
// in every roll: planned with a tail, planned with nothing pooled, and
// after a halt.
func TestRollerRepublishSeesPooledPayloads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := &hookLog{}
		sc := openTail(t, roll.Options{Republish: h.hook, RollOnHalt: true}, oneStream)
		require.Empty(t, h.seen(), "no roll, no call")
		c := sc.e.Constants(3, 8)
		require.NoError(t, sc.r.Roll(ctx, c))
		calls := h.seen()
		require.Len(t, calls, 1)
		require.Equal(t, uint64(2), calls[0].next.Epoch)
		require.Equal(t, starA, calls[0].next.Star)
		require.Equal(t, c, calls[0].next.Constants, "the new epoch's record")
		require.Equal(t, []string{string(sc.pay[3]), string(sc.pay[4]), string(sc.pay[5])}, calls[0].payloads, "the tail, in order")
		acked := map[string]chain.Position{}
		for i, a := range sc.apps {
			pos, err := a.Wait(ctx)
			require.NoError(t, err)
			acked[sc.ids[i]] = pos
			if i >= 3 {
				require.Equal(t, chain.Position{Epoch: 2, Slot: uint64(i - 3)}, pos, "republished in order")
			}
		}

		// A planned roll with nothing pooled calls the hook too.
		require.NoError(t, sc.r.Roll(ctx, sc.e.Constants(2, 8)))
		calls = h.seen()
		require.Len(t, calls, 2)
		require.Equal(t, uint64(3), calls[1].next.Epoch)
		require.Empty(t, calls[1].payloads)

		// So does a roll after a halt: someone fences epoch 3 at slot 2.
		for _, z := range sc.e.Raw[:2] {
			require.NoError(t, z.Create(ctx, sc.e.Key(starA, 3, 2), wire.EncodePoison(starA, 3, 2, "other")))
		}
		var apps []*roll.Future
		for i := 6; i < 12; i++ {
			a, err := sc.r.Submit(ctx, record(stream, uint64(i), fmt.Sprintf("r%d", i)))
			require.NoError(t, err)
			apps = append(apps, a)
		}
		var inNew []string
		for i, a := range apps {
			pos, err := a.Wait(ctx)
			require.NoError(t, err)
			acked[fmt.Sprintf("r%d", i+6)] = pos
			if pos.Epoch == 4 {
				inNew = append(inNew, string(record(stream, uint64(i+6), fmt.Sprintf("r%d", i+6))))
			}
		}
		require.NoError(t, sc.r.Close(ctx))
		calls = h.seen()
		require.Len(t, calls, 3)
		require.Equal(t, uint64(4), calls[2].next.Epoch)
		// What the halted writer had placed past the cut was pooled; what
		// came after the halt went straight to the new writer.
		require.NotEmpty(t, calls[2].payloads, "r8 was placed at the dead slot 2")
		require.Equal(t, inNew[:len(calls[2].payloads)], calls[2].payloads)
		verifyChain(t, sc.p, acked)
		require.Equal(t, []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11"}, settletest.CheckStream(t, sc.p, stream))
	})
}

// A dropped append fails with ErrDropped and the hook's error, and is
// never in the chain; the others are acknowledged in the new epoch, in
// order, closing the gap.
func TestRollerRepublishDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		expired := errors.New("record expired")
		h := &hookLog{answer: func(_ int, _ *epoch.Record, payloads [][]byte) ([]error, error) {
			errs := make([]error, len(payloads))
			for i, p := range payloads {
				if bytes.HasPrefix(p, []byte("other|")) {
					errs[i] = expired
				}
			}
			return errs, nil
		}}
		// Record 4 is the only one of stream "other": dropping it leaves
		// stream s tiled.
		sc := openTail(t, roll.Options{Republish: h.hook}, func(i int) (string, uint64) {
			switch {
			case i == 4:
				return "other", 0
			case i > 4:
				return stream, uint64(i - 1)
			}
			return stream, uint64(i)
		})
		require.NoError(t, sc.r.Roll(ctx, sc.e.Constants(2, 8)))
		acked := map[string]chain.Position{}
		for i, a := range sc.apps {
			pos, err := a.Wait(ctx)
			if i == 4 {
				require.ErrorIs(t, err, roll.ErrDropped)
				require.ErrorIs(t, err, expired)
				require.Zero(t, pos)
				continue
			}
			require.NoError(t, err, "append %d", i)
			acked[sc.ids[i]] = pos
		}
		require.Equal(t, chain.Position{Epoch: 2, Slot: 0}, acked["r3"])
		require.Equal(t, chain.Position{Epoch: 2, Slot: 1}, acked["r5"], "the next one takes the dropped one's place")
		require.NoError(t, sc.r.Close(ctx))
		ids := verifyChain(t, sc.p, acked)
		require.NotContains(t, ids, "r4")
		require.Equal(t, []string{"r0", "r1", "r2", "r3", "r5"}, settletest.CheckStream(t, sc.p, stream))
		require.Empty(t, settletest.RefsOf(t, sc.p.Refs, "other"))
	})
}

// A hook that fails twice delays the republish by the roller's backoff;
// nothing lands in the new epoch before it succeeded, appends submitted
// meanwhile included.
func TestRollerRepublishRetriesFailedHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		busy := errors.New("host busy")
		var sc *tailScenario
		var late *roll.Future
		lateDone := make(chan struct{})
		var empty []string
		h := &hookLog{}
		h.answer = func(call int, next *epoch.Record, payloads [][]byte) ([]error, error) {
			// The new epoch is empty in every zone while the hook runs.
			empty = append(empty, sc.e.State(next, 0))
			if call == 0 {
				// An append submitted during the roll waits for it.
				go func() {
					defer close(lateDone)
					a, err := sc.r.Submit(ctx, record(stream, 6, "r6"))
					if err == nil {
						late = a
					}
				}()
				synctest.Wait()
				select {
				case <-lateDone:
					t.Error("a Submit during the roll returned before the roll ended")
				default:
				}
			}
			if call < 2 {
				return nil, busy
			}
			return make([]error, len(payloads)), nil
		}
		sc = openTail(t, roll.Options{Republish: h.hook, Backoff: clock.Backoff{Min: time.Second, Max: time.Second}}, oneStream)
		require.NoError(t, sc.r.Roll(ctx, sc.e.Constants(2, 8)))
		calls := h.seen()
		require.Len(t, calls, 3, "two failures, one success")
		for i := 1; i < 3; i++ {
			require.GreaterOrEqual(t, calls[i].at.Sub(calls[i-1].at), time.Second, "attempts are Backoff apart")
			require.Equal(t, calls[0].payloads, calls[i].payloads, "every attempt sees the same tail")
			require.Equal(t, calls[0].next.Epoch, calls[i].next.Epoch, "and the same new epoch")
		}
		require.Equal(t, []string{"E E E", "E E E", "E E E"}, empty, "the new epoch's slot 0 stays empty until the hook succeeded")
		<-lateDone
		require.NotNil(t, late)
		acked := map[string]chain.Position{}
		for i, a := range sc.apps {
			pos, err := a.Wait(ctx)
			require.NoError(t, err)
			acked[sc.ids[i]] = pos
		}
		pos, err := late.Wait(ctx)
		require.NoError(t, err)
		acked["r6"] = pos
		require.Equal(t, chain.Position{Epoch: 2, Slot: 3}, pos, "the append submitted during the roll comes after the republished ones")
		require.NoError(t, sc.r.Close(ctx))
		verifyChain(t, sc.p, acked)
	})
}

// A hook answering the wrong number of errors fails the step with a
// message saying so; the roller does not panic, retries, and republishes
// once the hook answers right.
func TestRollerRepublishWrongLength(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var logs bytes.Buffer
		var logMu sync.Mutex
		h := &hookLog{answer: func(call int, _ *epoch.Record, payloads [][]byte) ([]error, error) {
			if call == 0 {
				return []error{nil}, nil
			}
			return make([]error, len(payloads)), nil
		}}
		sc := openTail(t, roll.Options{Republish: h.hook, Backoff: clock.Backoff{Min: time.Millisecond, Max: time.Millisecond},
			Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))}, oneStream)
		require.NoError(t, sc.r.Roll(ctx, sc.e.Constants(2, 8)))
		require.Len(t, h.seen(), 2)
		logMu.Lock()
		out := logs.String()
		logMu.Unlock()
		require.Contains(t, out, "step=republish")
		require.Contains(t, out, "returned 1 errors for 3 payloads")
		acked := map[string]chain.Position{}
		for i, a := range sc.apps {
			pos, err := a.Wait(ctx)
			require.NoError(t, err)
			acked[sc.ids[i]] = pos
		}
		require.Equal(t, chain.Position{Epoch: 2, Slot: 2}, acked["r5"])
		require.NoError(t, sc.r.Close(ctx))
		verifyChain(t, sc.p, acked)
	})
}

// A roller closed while its hook keeps failing fails the pooled appends
// with the roller's closed error; the new epoch stays empty and the next start
// settles it.
func TestRollerRepublishCloseWhileFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := &hookLog{answer: func(int, *epoch.Record, [][]byte) ([]error, error) { return nil, errors.New("never") }}
		sc := openTail(t, roll.Options{Republish: h.hook}, oneStream)
		rolled := make(chan error, 1)
		go func() { rolled <- sc.r.Roll(ctx, sc.e.Constants(2, 8)) }()
		time.Sleep(time.Minute)
		require.NotEmpty(t, h.seen())
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		require.ErrorIs(t, sc.r.Close(cctx), context.DeadlineExceeded)
		require.Error(t, <-rolled)
		for i, a := range sc.apps[3:] {
			_, err := a.Wait(ctx)
			require.ErrorIs(t, err, roll.ErrClosedForTest, "append %d", i+3)
		}
		rec, err := sc.p.Minter.Get(ctx, starA, 2)
		require.NoError(t, err)
		require.Equal(t, "E E E", sc.e.State(rec, 0))
		_, err = sc.p.Settler.SettleAll(ctx, starA)
		require.NoError(t, err)
		require.Equal(t, []string{"r0", "r1", "r2"}, settletest.CheckStream(t, sc.p, stream))
	})
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
