package chain

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/clock"
)

func TestSlotKeyMatchesKeys(t *testing.T) {
	for _, k := range []wire.Keys{{}, {Prefix: "p"}, {Prefix: "a/b.c"}} {
		w := &Writer{keyPrefix: k.Epoch("star-a", 12)}
		for _, s := range []uint64{0, 1, 9, 10, 12345, 1 << 40, 1<<63 + 5, ^uint64(0)} {
			require.Equal(t, k.Slot("star-a", 12, s), string(w.appendSlotKey(nil, s)))
		}
		// Keys made in the shared buffer stay what they were as it
		// fills up and is replaced.
		var made []string
		for s := range uint64(3*keySlab + 5) {
			made = append(made, w.slotKeyLocked(s))
		}
		for s, key := range made {
			require.Equal(t, k.Slot("star-a", 12, uint64(s)), key)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	w := &Writer{opts: WriterOptions{Backoff: clock.Backoff{Min: 10 * time.Millisecond, Max: time.Second}}, seed: 7}
	for attempt := range 20 {
		d := min(10*time.Millisecond<<attempt, time.Second)
		for slot := range uint64(50) {
			got := w.backoffDelay(slot, attempt%3, attempt)
			require.GreaterOrEqual(t, got, d/2)
			require.Less(t, got, d)
		}
	}
	require.Equal(t, w.backoffDelay(3, 1, 2), w.backoffDelay(3, 1, 2), "reproducible")
	w.opts.Backoff = clock.Backoff{Min: 1, Max: 1}
	require.Equal(t, time.Duration(1), w.backoffDelay(0, 0, 5))
}
