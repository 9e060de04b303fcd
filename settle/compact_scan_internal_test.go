package settle

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScanMemoryBounds: a Compactor remembers the scans of at most
// maxScanEpochs epochs and maxHeldPages held pages over all of them,
// forgetting the epoch compacted longest ago first, and never a scan that
// found more held pages than it could track.
func TestScanMemoryBounds(t *testing.T) {
	c := &Compactor{scans: map[scanKey]*scanState{}}
	scan := func(pages int) *scanState {
		s := &scanState{gap: noSlot, heldMin: noSlot, held: map[string]heldPage{}}
		for i := range pages {
			s.hold("s", fmt.Sprintf("refpages/s/%020d", i), uint64(i))
		}
		return s
	}
	for ep := range uint64(maxScanEpochs + 10) {
		c.keepScan("star", ep, scan(1))
	}
	require.Len(t, c.scans, maxScanEpochs)
	require.Equal(t, maxScanEpochs, c.scanPages)
	_, ok := c.scans[scanKey{"star", 9}]
	require.False(t, ok, "the oldest epochs are forgotten first")
	c.lastScan("star", 10) // used again: now the newest
	c.keepScan("star", 1000, scan(maxHeldPages-10))
	require.LessOrEqual(t, c.scanPages, maxHeldPages)
	_, ok = c.scans[scanKey{"star", 10}]
	require.True(t, ok, "an epoch used lately stays")
	_, ok = c.scans[scanKey{"star", 11}]
	require.False(t, ok)

	over := scan(maxHeldPages + 1)
	require.True(t, over.overflow)
	require.Len(t, over.held, maxHeldPages)
	require.Equal(t, uint64(maxHeldPages), over.heldMin)
	require.Equal(t, uint64(0), over.target())
	c.keepScan("star", 1000, over)
	_, ok = c.scans[scanKey{"star", 1000}]
	require.False(t, ok, "a scan past the bound is not remembered")
	require.Equal(t, len(c.scans), c.scanPages)
}
