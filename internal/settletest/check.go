package settletest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// RefsOf lists a stream's refs, without their headers.
func RefsOf(t testing.TB, x *settle.RefIndex, stream string) []settle.Ref {
	t.Helper()
	var out []settle.Ref
	for r, err := range x.Refs(context.Background(), stream) {
		require.NoError(t, err)
		r.RecordHeader = metastore.RecordHeader{}
		out = append(out, r)
	}
	return out
}

// CheckStream checks the host's index of stream after any takeover or
// roll (cutlinetest's StreamIDs): the refs cover [0, next) without holes
// or overlaps, every ref's flight is readable and carries exactly the
// offset the ref claims, and it returns the record ids in offset order.
func CheckStream(t testing.TB, p *Party, stream string) []string {
	t.Helper()
	return p.HarnessOn(t).StreamIDs(stream)
}

// ChainIDs reads a star's whole chain and returns the record ids in chain
// order with their positions (cutlinetest's ChainIDs).
func ChainIDs(t testing.TB, p *Party, star string) ([]string, []chain.Position) {
	t.Helper()
	return p.HarnessOn(t).ChainIDs(star)
}

// RequireUnique fails if an id occurs twice.
func RequireUnique(t testing.TB, ids []string, what string) {
	t.Helper()
	seen := map[string]int{}
	for i, id := range ids {
		if j, ok := seen[id]; ok {
			t.Fatalf("%s: record %s appears twice (at %d and %d)", what, id, j, i)
		}
		seen[id] = i
	}
}
