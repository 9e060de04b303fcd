package fence

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/internal/planted/failfast"
	"github.com/cutline/cutline/objstore"
)

// poisonOnFirstCreate is zone a as a writer sees it when a fencer's
// poison lands between two attempts of its create: the first attempt
// fails without landing (its answer says unavailable), and by the retry
// the slot holds poison.
type poisonOnFirstCreate struct {
	objstore.Bucket
	raw    objstore.Bucket
	poison []byte
	mu     sync.Mutex
	tries  int
	err    error
	retry  chan struct{} // closed when the retry's answer is in
}

func (b *poisonOnFirstCreate) Create(ctx context.Context, key string, data []byte) error {
	b.mu.Lock()
	b.tries++
	try := b.tries
	b.mu.Unlock()
	if try == 1 {
		if err := b.raw.Create(ctx, key, b.poison); err != nil {
			b.mu.Lock()
			b.err = err
			b.mu.Unlock()
		}
		return objstore.ErrUnavailable
	}
	err := b.Bucket.Create(ctx, key, data)
	if try == 2 {
		close(b.retry)
	}
	return err
}

// heldCreate holds zone c's create until released.
type heldCreate struct {
	objstore.Bucket
	release chan struct{}
}

func (b heldCreate) Create(ctx context.Context, key string, data []byte) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.Bucket.Create(ctx, key, data)
}

// retriedCreateMeetsPoison: K=3, W=2. Slot 0's create in zone a fails
// without landing, a fencer's poison lands there, and the retry finds an
// object: the writer must read it, see poison, and never count it as its
// copy. Zone b holds the writer's copy; zone c gets poison too, so the
// slot is dead and the writer halts with ErrFenced. A writer that counts
// the object its retry found as its own acknowledges the slot (a and b).
func retriedCreateMeetsPoison(t testing.TB) {
	e := newEnv(t, 3, 2, 4)
	poison := wire.EncodePoison(star, e.rec.Epoch, 0, "racing-fencer")
	za := &poisonOnFirstCreate{Bucket: e.zones[0], raw: e.raw[0], poison: poison, retry: make(chan struct{})}
	zc := heldCreate{Bucket: e.zones[2], release: make(chan struct{})}
	w := e.writer([]objstore.Bucket{za, e.zones[1], zc}, chain.WriterOptions{Backoff: clock.Backoff{Min: time.Millisecond, Max: time.Millisecond}})
	ctx, cancel := context.WithTimeout(t.Context(), failfast.Bound)
	defer cancel()
	f, err := w.Submit(ctx, payload(0))
	require.NoError(t, err)
	select {
	case <-za.retry:
	case <-ctx.Done():
		t.Fatalf("the writer never retried its create in zone a")
	}
	za.mu.Lock()
	require.NoError(t, za.err, "placing the fencer's poison")
	za.mu.Unlock()
	require.NoError(t, e.raw[2].Create(ctx, e.slot(0).Key(), poison))
	close(zc.release)
	_, err = f.Wait(ctx)
	require.ErrorIs(t, err, chain.ErrFenced, "slot 0 holds poison in zones a and c: it must never be acknowledged")
}

func TestRetriedCreateMeetsPoison(t *testing.T) { retriedCreateMeetsPoison(t) }
