package crashpoint_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/internal/crashpoint"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/settle"
)

// indexStreams are the streams of the index scenarios: two, interleaved
// in 150 flights, so that each has three pages.
var indexStreams = []string{"s", "t"}

// coverIndex covers the index scenarios' flights through a party of env.
func coverIndex(t *testing.T, ctx context.Context, env *cutlinetest.Env) {
	t.Helper()
	var flights []settle.Placed
	for i := range uint64(150) {
		f := settle.Placed{Position: chain.Position{Epoch: 1, Slot: i}}
		for j, s := range indexStreams {
			f.Spans = append(f.Spans, settle.Span{Stream: s, Offset: i, Count: 1, Start: uint64(j), End: uint64(j + 1)})
		}
		flights = append(flights, f)
	}
	require.NoError(t, env.Party("writer").Refs.CoverFlights(ctx, starA, flights))
}

// requireIndex checks every stream of the index scenarios from start on
// (a read below it is trimmed) through a fresh party.
func requireIndex(t *testing.T, ctx context.Context, env *cutlinetest.Env, start uint64) {
	t.Helper()
	refs := env.Party("reader").Refs
	for _, s := range indexStreams {
		next, err := refs.Next(ctx, s)
		require.NoError(t, err, s)
		require.Equal(t, uint64(150), next, s)
		for off := range uint64(150) {
			r, err := refs.Find(ctx, s, off)
			if off < start {
				require.ErrorIs(t, err, settle.ErrBelowRetention, "%s/%d", s, off)
				continue
			}
			require.NoError(t, err, "%s/%d", s, off)
			require.Equal(t, off, r.Slot, "%s/%d", s, off)
		}
		n := 0
		for r, err := range refs.Refs(ctx, s) {
			require.NoError(t, err)
			require.Equal(t, max(start, uint64(n)), r.Offset)
			n = int(r.Offset) + 1
		}
	}
}

// scenarioRetain: the process moves both streams' retention point to 130
// (the point, then the deletes of the pages below). Recovery: another
// process retains again; reads below 130 are trimmed, the rest reads.
func scenarioRetain(t *testing.T, sw *crashpoint.Switch) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	env := cutlinetest.NewMem(t, 3)
	coverIndex(t, ctx, env)
	p := newProcess(t, env, "retainer-1", sw)
	for _, s := range indexStreams {
		if _, err := p.Refs.Retain(sw.Bind(ctx), s, 130); err != nil {
			crashed(t, sw, err, "retain "+s)
			break
		}
	}
	q := env.Party("retainer-2")
	for _, s := range indexStreams {
		rep, err := q.Refs.Retain(ctx, s, 130)
		require.NoError(t, err)
		require.Equal(t, uint64(130), rep.Start)
	}
	requireIndex(t, ctx, env, 130)
	kvs, _, err := env.Store.List(ctx, "refpages/")
	require.NoError(t, err)
	require.Len(t, kvs, 2*1, "of each stream's pages [0, 64), [64, 128) and [128, 150), only the last holds offsets from 130 on")
}

// scenarioMigrate: the process migrates an index of format 1 (pages
// created one by one, then the old keys deleted). Recovery: another
// process migrates again; every offset reads as before.
func scenarioMigrate(t *testing.T, sw *crashpoint.Switch) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	env := cutlinetest.NewMem(t, 3)
	for _, s := range indexStreams {
		for i := range 150 {
			v := fmt.Sprintf(`{"kind":"ref","format":1,"stream":%q,"offset":%d,"count":1,"star":%q,"epoch":1,"slot":%d,"start":0,"end":1}`, s, i, starA, i)
			_, err := metastore.Put(ctx, env.Store, fmt.Sprintf("refs/%s/%020d", s, i), []byte(v), 0)
			require.NoError(t, err)
		}
		_, err := metastore.Put(ctx, env.Store, "refheads/"+s, []byte(fmt.Sprintf(`{"kind":"refhead","format":1,"stream":%q,"next":150}`, s)), 0)
		require.NoError(t, err)
	}
	p := newProcess(t, env, "migrator-1", sw)
	for _, err := range p.Refs.MigrateAll(sw.Bind(ctx)) {
		if err != nil {
			crashed(t, sw, err, "migrate")
		}
	}
	for _, err := range env.Party("migrator-2").Refs.MigrateAll(ctx) {
		require.NoError(t, err)
	}
	requireIndex(t, ctx, env, 0)
	kvs, _, err := env.Store.List(ctx, "refs/")
	require.NoError(t, err)
	require.Empty(t, kvs)
}
