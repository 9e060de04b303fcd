package crashpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/crashpoint"
)

// Runtime function names map to the declared function the enumerator
// names a site by: closures, go and defer wrappers, range-over-func
// bodies and generic instantiations belong to the function declaring
// them.
func TestStepName(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/cutline/cutline/fence.(*walk).poison":                "fence.(*walk).poison",
		"github.com/cutline/cutline/fence.(*walk).copyInto.func1":        "fence.(*walk).copyInto",
		"github.com/cutline/cutline/lease.Start.func2.1":                 "lease.Start",
		"github.com/cutline/cutline/settle.(*Settler).trimBucket-range1": "settle.(*Settler).trimBucket",
		"github.com/cutline/cutline/chain.(*Writer).wakeLocked.gowrap1":  "chain.(*Writer).wakeLocked",
		"github.com/cutline/cutline/settle.(*sweep).drop.deferwrap1":     "settle.(*sweep).drop",
		"github.com/cutline/cutline/epoch.list[...].each":                "epoch.list.each",
		"github.com/cutline/cutline/chain/wire.Observe.func3":            "chain/wire.Observe",
	} {
		require.Equal(t, want, crashpoint.StepName(in), in)
	}
}

// A request made inside a shorthand of package metastore or objstore is
// attributed to the shorthand's call; methods and unexported functions are
// not shorthands.
func TestShorthandName(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/cutline/cutline/metastore.Put":                   "metastore.Put",
		"github.com/cutline/cutline/metastore.PutBound":              "metastore.PutBound",
		"github.com/cutline/cutline/objstore.Verify":                 "objstore.Verify",
		"github.com/cutline/cutline/metastore.(*classified).Err":     "",
		"github.com/cutline/cutline/metastore.put":                   "",
		"github.com/cutline/cutline/metastore/memstore.(*Store).Txn": "",
		"github.com/cutline/cutline/settle.Put":                      "",
	} {
		got, ok := crashpoint.ShorthandName(in)
		require.Equal(t, want != "", ok, in)
		require.Equal(t, want, got, in)
	}
}

// A directory that is not the module's root is refused with ErrNoModule.
func TestEnumerateRefusesNonModule(t *testing.T) {
	_, err := crashpoint.Enumerate(t.TempDir(), crashpoint.Packages)
	require.ErrorIs(t, err, crashpoint.ErrNoModule)
	_, err = crashpoint.EnumerateDir(t.TempDir(), "testdata/newstep", "newstep")
	require.ErrorIs(t, err, crashpoint.ErrNoModule)
	_, err = crashpoint.Enumerate(moduleRoot(t), []string{"no/such/package"})
	require.Error(t, err)
}
