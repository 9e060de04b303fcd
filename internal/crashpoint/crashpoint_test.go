package crashpoint_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/crashpoint"
)

// moduleRoot is the module's directory, found from this file's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func enumerate(t *testing.T) (*crashpoint.Enumeration, *crashpoint.Table) {
	t.Helper()
	en, err := crashpoint.Enumerate(moduleRoot(t), crashpoint.Packages)
	require.NoError(t, err)
	require.Empty(t, en.Unresolved, "calls that look like storage requests on receivers the enumerator could not resolve")
	return en, crashpoint.NewTable(crashpoint.Packages, en.Sites)
}

// occurrences picks which requests on one path a scenario crashes: every
// one when there are few, else the first two, the middle and the last
// two.
func occurrences(n int) []int {
	if n <= 5 {
		out := make([]int, n)
		for i := range out {
			out[i] = i + 1
		}
		return out
	}
	return []int{1, 2, (n + 1) / 2, n - 1, n}
}

// TestCrashPoints crashes every mutating request site of the production
// packages, found in their source, before its request arrives and after
// it ran with its answer lost, in every scenario that reaches it; each
// run recovers as a host would and checks every guarantee. Every live
// site must be covered in both modes.
func TestCrashPoints(t *testing.T) {
	en, table := enumerate(t)
	live := en.Live()
	for _, s := range en.Sites {
		if s.Planted {
			t.Logf("planted-only site, not reachable in a normal build: %s", s)
		}
	}
	modes := []crashpoint.Mode{crashpoint.Before, crashpoint.After}
	covered := crashpoint.Coverage{}
	via := map[string][]string{} // the steps each site was crashed on
	runs, missed := 0, 0
	var failed []string
	for _, sc := range scenarios {
		var counts map[crashpoint.Path]int
		var unattributed []string
		ok := t.Run(sc.name+"/dry", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sw := crashpoint.NewSwitch(table, crashpoint.Target{})
				sc.run(t, sw)
				counts, unattributed = sw.Counts(), sw.Unattributed()
			})
		})
		runs++
		require.True(t, ok, "scenario %s must complete without a crash", sc.name)
		require.Empty(t, unattributed, "scenario %s made requests from no enumerated site", sc.name)
		paths := make([]crashpoint.Path, 0, len(counts))
		for p := range counts {
			paths = append(paths, p)
		}
		sort.Slice(paths, func(i, j int) bool { return paths[i].String() < paths[j].String() })
		for _, p := range paths {
			t.Logf("scenario %s: %s: %d requests", sc.name, p, counts[p])
		}
		for _, p := range paths {
			for _, n := range occurrences(counts[p]) {
				for _, mode := range modes {
					target := crashpoint.Target{Site: p.Site, Via: p.Via, Occurrence: n, Mode: mode}
					var fired bool
					var trace []string
					ok := t.Run(fmt.Sprintf("%s/%s#%d/%s", sc.name, p, n, mode), func(t *testing.T) {
						synctest.Test(t, func(t *testing.T) {
							sw := crashpoint.NewSwitch(table, target)
							sc.run(t, sw)
							fired, trace = sw.Dead(), sw.Trace()
							require.Empty(t, sw.Unattributed(), "requests from no enumerated site")
						})
					})
					runs++
					if !ok {
						failed = append(failed, fmt.Sprintf("%s: %v", sc.name, target))
						continue
					}
					if !fired {
						// The scenario took another path this time.
						missed++
						t.Logf("scenario %s: %v never came (trace %q)", sc.name, target, trace)
						continue
					}
					covered.Add(p.Site, mode)
					via[p.Site] = appendNew(via[p.Site], p.Via)
				}
			}
		}
	}
	for _, s := range live {
		sort.Strings(via[s.Name])
		t.Logf("%s: crashed via %s", s.Name, strings.Join(via[s.Name], ", "))
	}
	var uncovered []string
	for _, s := range covered.Uncovered(live) {
		uncovered = append(uncovered, s.String())
	}
	t.Logf("crash points: covered %d of %d enumerated (%d runs, %d targets not reached)", len(live)-len(uncovered), len(live), runs, missed)
	require.Empty(t, failed, "crash cases whose recovery or checks failed")
	require.Empty(t, uncovered, "sites without a crash case before and after their request: add a scenario step that reaches each (see doc.go)")
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// TestEnumeratorFindsPlantedSite: a synthetic package with a new mutating
// call is enumerated, and the coverage computed as the main test does
// reports its site as uncovered by name.
func TestEnumeratorFindsPlantedSite(t *testing.T) {
	root := moduleRoot(t)
	en, err := crashpoint.EnumerateDir(root, filepath.Join("testdata", "newstep"), "newstep")
	require.NoError(t, err)
	var names []string
	for _, s := range en.Sites {
		names = append(names, s.Name)
		if s.Planted {
			names[len(names)-1] += " (planted)"
		}
	}
	require.ElementsMatch(t, []string{
		"newstep.(*Step).Run → Bucket.Create",
		"newstep.(*Step).Run → metastore.Put",
		"newstep.(*Step).Run → Bucket.Create #2",
		"newstep.(*Step).Cleanup → Bucket.Delete",
		"newstep.(*Step).Cleanup → Store.Txn (planted)",
		"newstep.bindMarker → metastore.PutBound",
		"newstep.wrapped.Create → Bucket.Create",
	}, names)
	require.Len(t, en.Unresolved, 1)
	require.Equal(t, "undefinedThing.Create", en.Unresolved[0].Expr)

	// A run that crashed every site of the real packages in both modes
	// covers them all; the new step's sites are reported by name.
	real, _ := enumerate(t)
	covered := crashpoint.Coverage{}
	for _, s := range real.Live() {
		covered.Add(s.Name, crashpoint.Before)
		covered.Add(s.Name, crashpoint.After)
	}
	require.Empty(t, covered.Uncovered(real.Sites))
	var uncovered []string
	for _, s := range covered.Uncovered(append(real.Sites, en.Sites...)) {
		uncovered = append(uncovered, s.Name)
	}
	require.ElementsMatch(t, []string{
		"newstep.(*Step).Run → Bucket.Create",
		"newstep.(*Step).Run → metastore.Put",
		"newstep.(*Step).Run → Bucket.Create #2",
		"newstep.(*Step).Cleanup → Bucket.Delete",
		"newstep.bindMarker → metastore.PutBound",
		"newstep.wrapped.Create → Bucket.Create",
	}, uncovered)

	// A site crashed in one mode only is still uncovered.
	covered.Add("newstep.bindMarker → metastore.PutBound", crashpoint.Before)
	require.Len(t, covered.Uncovered(en.Sites), 6)
	covered.Add("newstep.bindMarker → metastore.PutBound", crashpoint.After)
	require.Len(t, covered.Uncovered(en.Sites), 5)
}
