//go:build unix

package fence

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
)

// fsZones makes k filesystem buckets named a, b, c… under a temporary
// directory, closed when the test ends.
func fsZones(t *testing.T, k int, noSync bool) []objstore.Bucket {
	t.Helper()
	root := t.TempDir()
	out := make([]objstore.Bucket, k)
	for i := range out {
		name := string(rune('a' + i))
		b, err := fs.New(filepath.Join(root, name), fs.Options{Name: name, NoSync: noSync, CreateRoot: true})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, b.Close()) })
		out[i] = b
	}
	return out
}

// TestFSScenarios fences the hand-laid epochs of TestScenarios on the
// filesystem backend.
func TestFSScenarios(t *testing.T) {
	for _, c := range scenarios() {
		t.Run(c.name, func(t *testing.T) {
			runScenario(t, newEnvOn(t, fsZones(t, c.k, false), c.w, 4), c)
		})
	}
}

// TestFSLateFencerAdoptsThePublishedCut is
// TestLateFencerAdoptsThePublishedCut on the filesystem backend: the
// trimmed slots are really deleted files.
func TestFSLateFencerAdoptsThePublishedCut(t *testing.T) {
	lateFencerAdopts(t, newEnvOn(t, fsZones(t, 3, false), 2, 4))
}

// TestFSWriterRace races a live writer and a fencer on the filesystem
// backend, where creates are link(2) calls that really contend.
func TestFSWriterRace(t *testing.T) {
	cases := []struct{ k, w, window int }{{3, 2, 8}, {1, 1, 4}, {5, 3, 32}}
	for _, c := range cases {
		t.Run(fmt.Sprintf("K=%d,W=%d,window=%d", c.k, c.w, c.window), func(t *testing.T) {
			e := newEnvOn(t, fsZones(t, c.k, true), c.w, c.window)
			raceWriter(t, e, e.view(nil), e.view(nil), uint64(c.window))
		})
	}
}
