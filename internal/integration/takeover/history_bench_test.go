package takeover_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/internal/metacount"
	"github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

// The settlement benchmarks on embedded etcd: a star's history (past
// epochs) must not make its takeover slower. The zones are in memory; the
// metastore is one embedded etcd member. Run them with
//
//	cd internal/integration && go test -run '^$' -bench EtcdHistory -benchtime 5x ./takeover/
//	cd internal/integration && go test -run '^$' -bench EtcdSettleAll -benchtime 1x ./takeover/
//
// keys/op are the metastore keys read (Gets that found their key, every
// key a List returned).

type etcdHist struct {
	store *metacount.Store
	m     *epoch.Minter
	raw   []objstore.Bucket
	refs  *settle.RefIndex
	s     *settle.Settler
	c     epoch.Constants
	next  uint64
	open  *epoch.Record
}

func newEtcdHist(b *testing.B, root string, window int) *etcdHist {
	cli := etcdtest.Start(b)
	st, err := etcd.New(cli, etcd.Options{Root: root, RequestTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	h := &etcdHist{store: metacount.Wrap(st)}
	if h.m, err = epoch.NewMinter(h.store, epoch.Options{}); err != nil {
		b.Fatal(err)
	}
	for i := range 3 {
		h.raw = append(h.raw, memblob.New(fmt.Sprintf("zone-%c", 'a'+i)))
	}
	zones := chain.MustZones(h.raw...)
	f, err := fence.New(h.m, zones, fence.Options{Identity: starB})
	if err != nil {
		b.Fatal(err)
	}
	if h.refs, err = settle.NewRefIndex(h.store, "", cutlinetest.Locate); err != nil {
		b.Fatal(err)
	}
	if h.s, err = settle.New(h.m, zones, h.refs, settle.Options{Fencer: f}); err != nil {
		b.Fatal(err)
	}
	h.c = epoch.Constants{Class: "standard", Buckets: chain.Names(h.raw...), W: 2, Window: window, Prefix: "chains"}
	return h
}

// past gives star A n epochs fenced empty and settled.
func (h *etcdHist) past(b *testing.B, n int) {
	ctx := context.Background()
	for range n {
		rec, err := h.m.Mint(ctx, starA, h.c)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.m.Publish(ctx, starA, rec.Epoch, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := h.m.MarkSettled(ctx, starA, rec.Epoch); err != nil {
			b.Fatal(err)
		}
	}
}

// lay lays n committed flights in the epoch the last cycle minted (or a
// new one), two copies each, covered and checkpointed but the last lag.
func (h *etcdHist) lay(b *testing.B, n, lag int) {
	ctx := context.Background()
	rec := h.open
	h.open = nil
	if rec == nil {
		var err error
		if rec, err = h.m.Mint(ctx, starA, h.c); err != nil {
			b.Fatal(err)
		}
	}
	keys := wire.KeysOf(rec)
	for s := range uint64(n) {
		p := record(h.next+s, fmt.Sprintf("r%d", h.next+s))
		data := wire.EncodeFlight(starA, rec.Epoch, s, p)
		for _, z := range []int{int(s % 3), int(s+1) % 3} {
			if err := h.raw[z].Create(ctx, keys.Slot(starA, rec.Epoch, s), data); err != nil {
				b.Fatal(err)
			}
		}
		if s < uint64(n-lag) {
			if err := h.refs.Cover(ctx, starA, chain.Flight{Position: chain.Position{Epoch: rec.Epoch, Slot: s}, Payload: p}); err != nil {
				b.Fatal(err)
			}
		}
	}
	h.next += uint64(n)
	cl, err := rec.Claim()
	if err != nil {
		b.Fatal(err)
	}
	if n > lag {
		if _, err := cl.Advance(ctx, uint64(n-lag)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEtcdHistory: one cycle of a star's turnover after a crash
// (SettleAll over the epoch it died in, 8 flights, 3 not covered, then a
// mint), after n past epochs.
func BenchmarkEtcdHistory(b *testing.B) {
	for _, past := range []int{10, 1000, 2000} {
		b.Run(fmt.Sprintf("past=%d", past), func(b *testing.B) {
			h := newEtcdHist(b, fmt.Sprintf("/history-%d/", past), 16)
			h.past(b, past)
			ctx := context.Background()
			var keys int
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				h.lay(b, 8, 3)
				h.store.Reset()
				b.StartTimer()
				reps, err := h.s.SettleAll(ctx, starA)
				if err != nil || len(reps) != 1 || reps[0].Covered != 3 {
					b.Fatalf("%+v, %v", reps, err)
				}
				if h.open, err = h.m.Mint(ctx, starA, h.c); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				keys += h.store.Stats().Keys
			}
			b.ReportMetric(float64(keys)/float64(b.N), "keys/op")
		})
	}
}

// BenchmarkEtcdSettleAll: SettleAll over n unsettled epochs, each holding
// one acknowledged flight its host did not cover.
func BenchmarkEtcdSettleAll(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("epochs=%d", n), func(b *testing.B) {
			ctx := context.Background()
			var keys int
			for i := range b.N {
				b.StopTimer()
				h := newEtcdHist(b, fmt.Sprintf("/settleall-%d-%d/", n, i), 4)
				for range n {
					h.lay(b, 1, 1)
				}
				h.store.Reset()
				b.StartTimer()
				reps, err := h.s.SettleAll(ctx, starA)
				b.StopTimer()
				if err != nil || len(reps) != n {
					b.Fatalf("%d reports, %v", len(reps), err)
				}
				keys += h.store.Stats().Keys
			}
			b.ReportMetric(float64(keys)/float64(b.N), "keys/op")
			b.ReportMetric(float64(keys)/float64(b.N)/float64(n), "keys/epoch")
		})
	}
}
