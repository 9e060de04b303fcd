package crashpoint_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/crashpoint"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// compactSlots is how many flights the compaction scenario lays: each
// bundles record i of both indexStreams, so each stream has three pages.
const compactSlots = 150

// compactEpoch lays a settled epoch of bundled flights in every zone, and
// a segment a compactor that crashed long ago left for stream s's first
// page.
func compactEpoch(t *testing.T, ctx context.Context, env *cutlinetest.Env) *epoch.Record {
	t.Helper()
	a := env.Party("writer")
	rec := a.Mint(starA, env.Constants(2, 8))
	for i := range uint64(compactSlots) {
		var rs []cutlinetest.BundleRecord
		for _, s := range indexStreams {
			rs = append(rs, cutlinetest.BundleRecord{Stream: s, Offset: i, ID: fmt.Sprintf("%s%d", s, i)})
		}
		for _, z := range env.Raw {
			require.NoError(t, z.Create(ctx, cutlinetest.Slot(rec, i).Key(), wire.EncodeFlight(starA, rec.Epoch, i, cutlinetest.Bundle(rs...))))
		}
	}
	_, err := a.Settler.SettleAll(ctx, starA)
	require.NoError(t, err)
	old := fmt.Sprintf("%s/%s/segments/%020d/s/%020d-%020d-gone-%016x", wire.KeysOf(rec).Prefix, starA, rec.Epoch, 0, 64, 7)
	require.NoError(t, env.Raw[0].Create(ctx, strings.TrimPrefix(old, "/"), []byte("left by a crash")))
	return rec
}

// rivalStore runs a rival compactor's whole compaction just before the
// second transaction that moves ref pages, so that the process loses
// that one and drops the segments it wrote for it.
type rivalStore struct {
	metastore.Store
	rival func()
	once  sync.Once
	moves int
	mu    sync.Mutex
}

func (s *rivalStore) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	if len(t.Then) > 0 && strings.HasPrefix(t.Then[0].Key, "refpages/") && len(t.If) > 0 && t.If[0].Revision != 0 {
		s.mu.Lock()
		s.moves++
		n := s.moves
		s.mu.Unlock()
		if n == 2 {
			s.once.Do(s.rival)
		}
	}
	return s.Store.Txn(ctx, t)
}

// scenarioCompact: the process compacts an epoch, a pass at a time
// (segment creates and their read-backs, the pages' compare-and-sets, the
// rewritten cursor), loses its second pass to a rival compactor (and
// deletes the segments no page names), then collects the epoch's garbage
// (a crashed compactor's segment). Recovery: another compactor compacts
// and collects again. The cursor reaches the checkpoint, every segment
// object left is named by a page and has W copies, and both streams read
// back whole from segments, before and after the flights are trimmed.
func scenarioCompact(t *testing.T, sw *crashpoint.Switch) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	env := cutlinetest.NewMem(t, 3)
	rec := compactEpoch(t, ctx, env)
	rivalParty := env.Party("rival")
	rival, err := settle.NewCompactor(rivalParty.Minter, rivalParty.Zones, rivalParty.Refs, "rival", settle.CompactorOptions{})
	require.NoError(t, err)

	p := newProcess(t, env, "compactor-1", sw)
	st := &rivalStore{Store: p.store, rival: func() {
		_, err := rival.Compact(ctx, starA, rec.Epoch)
		require.NoError(t, err)
	}}
	refs, err := settle.NewRefIndex(st, "", cutlinetest.Locate)
	require.NoError(t, err)
	c, err := settle.NewCompactor(p.Minter, p.Zones, refs, "compactor-1", settle.CompactorOptions{PassSlots: 64})
	require.NoError(t, err)
	pctx := sw.Bind(ctx)
	if _, err := c.Compact(pctx, starA, rec.Epoch); err != nil {
		crashed(t, sw, err, "compact")
	} else if _, err := c.Collect(pctx, starA, rec.Epoch); err != nil {
		crashed(t, sw, err, "collect")
	}

	q := env.Party("compactor-2")
	c2, err := settle.NewCompactor(q.Minter, q.Zones, q.Refs, "compactor-2", settle.CompactorOptions{})
	require.NoError(t, err)
	rep, err := c2.Compact(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	require.Equal(t, uint64(compactSlots), rep.Rewritten)
	_, err = c2.Collect(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	requireSegments(t, ctx, env, rec)
	requireStreams(t, ctx, env, q)
	_, err = q.Settler.TrimRewritten(ctx, starA, rec.Epoch)
	require.NoError(t, err)
	requireStreams(t, ctx, env, q)
}

// requireSegments checks that every segment object of rec's epoch is
// named by a ref page and every named one has W copies.
func requireSegments(t *testing.T, ctx context.Context, env *cutlinetest.Env, rec *epoch.Record) {
	t.Helper()
	kvs, _, err := env.Store.List(ctx, "refpages/")
	require.NoError(t, err)
	named := map[string]bool{}
	for _, kv := range kvs {
		i := strings.Index(string(kv.Value), `"segment":"`)
		require.GreaterOrEqual(t, i, 0, "page %s is a page of segments", kv.Key)
		rest := string(kv.Value)[i+len(`"segment":"`):]
		named[rest[:strings.IndexByte(rest, '"')]] = true
	}
	copies := map[string]int{}
	for _, z := range env.Raw {
		for o, err := range objstore.All(ctx, z, fmt.Sprintf("%s/%s/segments/", wire.KeysOf(rec).Prefix, starA)) {
			require.NoError(t, err)
			require.True(t, named[o.Key], "segment %s is garbage", o.Key)
			copies[o.Key]++
		}
	}
	for k := range named {
		require.GreaterOrEqual(t, copies[k], 2, "segment %s", k)
	}
}

// requireStreams reads both streams whole through a StreamReader.
func requireStreams(t *testing.T, ctx context.Context, env *cutlinetest.Env, p *cutlinetest.Party) {
	t.Helper()
	r, err := settle.NewStreamReader(p.Minter, p.Zones, p.Refs, settle.StreamReaderOptions{})
	require.NoError(t, err)
	for _, s := range indexStreams {
		next := uint64(0)
		for ch, err := range r.Read(ctx, s, 0) {
			require.NoError(t, err)
			require.True(t, ch.InSegment(), "%s/%d", s, ch.Offset)
			require.Equal(t, next, ch.Offset)
			require.Contains(t, string(ch.Data), fmt.Sprintf("%q", fmt.Sprintf("%s%d", s, ch.Offset)))
			next = ch.Offset + ch.Count
		}
		require.Equal(t, uint64(compactSlots), next, s)
	}
}
