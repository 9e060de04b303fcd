package benchfix_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/internal/benchfix"
	"github.com/cutline/cutline/internal/synth"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/settle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	star   = "star-a"
	stream = "s"
)

func record(slot uint64) []byte { return fmt.Appendf(nil, "%s|%d", stream, slot) }

func locate(p []byte) ([]settle.Span, error) {
	name, off, ok := strings.Cut(string(p), "|")
	if !ok || name != stream {
		return nil, fmt.Errorf("not a record: %q", p)
	}
	o, err := strconv.ParseUint(off, 10, 64)
	if err != nil {
		return nil, err
	}
	return []settle.Span{{Stream: stream, Offset: o, Count: 1, End: uint64(len(p))}}, nil
}

func TestDiscard(t *testing.T) {
	ctx := context.Background()
	bs := benchfix.Discards("a", "b")
	if len(bs) != 2 || bs[0].Name() != "a" || bs[1].Name() != "b" {
		t.Fatalf("Discards: %v", bs)
	}
	d := bs[0].(*benchfix.Discard)
	for range 3 {
		if err := d.Create(ctx, "k", make([]byte, 10)); err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	if d.Bytes() != 30 {
		t.Errorf("Bytes = %d, want 30", d.Bytes())
	}
	if _, err := d.Get(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get: %v, want not found", err)
	}
	if _, err := d.GetRange(ctx, "k", 0, 1); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("GetRange: %v, want not found", err)
	}
	if l, err := d.List(ctx, "", "", 10); err != nil || len(l) != 0 {
		t.Errorf("List: %v, %v", l, err)
	}
	if err := d.Delete(ctx, "k"); err != nil {
		t.Errorf("Delete: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Create(cctx, "k", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Create after cancel: %v", err)
	}
	if d.Bytes() != 30 {
		t.Errorf("a refused create counted: %d bytes", d.Bytes())
	}
}

func TestCount(t *testing.T) {
	ctx := context.Background()
	raw, counted, slow := benchfix.Zones(0, "a", "b")
	if len(raw) != 2 || len(counted) != 2 || len(slow) != 2 {
		t.Fatalf("Zones: %d, %d, %d buckets", len(raw), len(counted), len(slow))
	}
	if err := raw[0].Create(ctx, "uncounted", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, b := range slow {
		if err := b.Create(ctx, "k", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Get(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.GetRange(ctx, "k", 0, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := b.List(ctx, "", "", 10); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	want := benchfix.Requests{Reads: 4, Creates: 2, Deletes: 2, Lists: 2}
	if got := benchfix.Count(counted); got != want {
		t.Errorf("Count = %v, want %v", got, want)
	}
	if got := want.Add(want).Div(2); got != want {
		t.Errorf("(r+r)/2 = %v, want %v", got, want)
	}
	if want.Total() != 10 {
		t.Errorf("Total = %d, want 10", want.Total())
	}
	benchfix.Reset(counted)
	if got := benchfix.Count(counted); got != (benchfix.Requests{}) {
		t.Errorf("after Reset: %v", got)
	}
}

// TestLayRaggedEpoch lays the epoch and has a successor take it over: the
// settlement covers the lag and the four tail slots before the hole.
func TestLayRaggedEpoch(t *testing.T) {
	ctx := context.Background()
	const committed, window, lag = 20, 16, 5
	store := memstore.New(memstore.Options{})
	m, err := epoch.NewMinter(store, epoch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := settle.NewRefIndex(store, "", locate)
	if err != nil {
		t.Fatal(err)
	}
	raw, counted, slow := benchfix.Zones(0, "a", "b", "c")
	l := benchfix.RaggedEpoch{Star: star, Prefix: "p", Committed: committed, Window: window, Lag: lag, Seed: 7, Record: record}
	ep, err := benchfix.LayRaggedEpoch(ctx, m, refs, raw, l)
	if err != nil {
		t.Fatal(err)
	}
	if got := benchfix.Count(counted); got.Total() != 0 {
		t.Errorf("laying out went through the counters: %v", got)
	}
	keys := wire.Keys{Prefix: "p"}
	copies := func(slot uint64) int {
		n := 0
		for _, b := range raw {
			if _, err := b.Get(ctx, keys.Slot(star, ep, slot)); err == nil {
				n++
			}
		}
		return n
	}
	for slot, want := range map[uint64]int{0: 2, committed - 1: 2, committed: 1, committed + 1: 2, committed + 2: 3, committed + 3: 1, committed + 4: 0} {
		if got := copies(slot); got != want {
			t.Errorf("slot %d: %d copies, want %d", slot, got, want)
		}
	}
	if next, err := refs.Next(ctx, stream); err != nil || next != committed-lag {
		t.Errorf("Next = %d, %v; want %d", next, err, committed-lag)
	}

	zones := chain.MustZones(slow...)
	f, err := fence.New(m, zones, fence.Options{Identity: "successor"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := settle.New(m, zones, refs, settle.Options{Fencer: f})
	if err != nil {
		t.Fatal(err)
	}
	reps, err := st.SettleAll(ctx, star)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Epoch != ep || reps[0].Covered != lag+4 {
		t.Fatalf("reports %+v, want one of epoch %d covering %d", reps, ep, lag+4)
	}
	if got := benchfix.Count(counted); got.Reads == 0 || got.Creates == 0 {
		t.Errorf("the takeover's requests were not counted: %v", got)
	}
}

func TestLayRaggedEpochRefusesBadLayouts(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	m, err := epoch.NewMinter(store, epoch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := settle.NewRefIndex(store, "", locate)
	if err != nil {
		t.Fatal(err)
	}
	raw, _, _ := benchfix.Zones(0, "a", "b", "c")
	good := benchfix.RaggedEpoch{Star: star, Prefix: "p", Committed: 4, Window: 8, Lag: 1, Record: record}
	for name, bad := range map[string]func(l *benchfix.RaggedEpoch) []objstore.Bucket{
		"two zones":    func(l *benchfix.RaggedEpoch) []objstore.Bucket { return raw[:2] },
		"small window": func(l *benchfix.RaggedEpoch) []objstore.Bucket { l.Window = 4; return raw },
		"lag > n":      func(l *benchfix.RaggedEpoch) []objstore.Bucket { l.Lag = 5; return raw },
		"no record":    func(l *benchfix.RaggedEpoch) []objstore.Bucket { l.Record = nil; return raw },
		"laid > n":     func(l *benchfix.RaggedEpoch) []objstore.Bucket { l.Laid = 5; return raw },
	} {
		l := good
		zs := bad(&l)
		if _, err := benchfix.LayRaggedEpoch(ctx, m, refs, zs, l); !errors.Is(err, cutline.ErrInvalid) {
			t.Errorf("%s: %v, want cutline.ErrInvalid", name, err)
		}
	}
}

// TestLayRaggedEpochOnSyntheticPrefix lays the epoch over synthetic
// buckets that hold the committed prefix already, with the prefix's refs
// written as one span: a successor's takeover covers the same flights.
func TestLayRaggedEpochOnSyntheticPrefix(t *testing.T) {
	ctx := context.Background()
	const committed, window, lag, laid = 1_000_000, 16, 5, 1_000_000 - 5
	store := memstore.New(memstore.Options{})
	m, err := epoch.NewMinter(store, epoch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := settle.NewRefIndex(store, "", locate)
	if err != nil {
		t.Fatal(err)
	}
	c := &synth.Chain{Star: star, N: laid, Payload: record(0)}
	var raw, views []objstore.Bucket
	var counted []*fault.Bucket
	for _, b := range synth.NewZones(c, 3) {
		f := fault.Wrap(b, fault.Options{})
		raw, counted, views = append(raw, b), append(counted, f), append(views, f)
	}
	var prefixCalls int
	l := benchfix.RaggedEpoch{Star: star, Prefix: "p", Committed: committed, Window: window, Lag: lag, Record: record, Laid: laid,
		CoverPrefix: func(ctx context.Context, refs *settle.RefIndex, ep, covered uint64) error {
			prefixCalls++
			return refs.CoverSpan(ctx, star, chain.Position{Epoch: ep, Slot: 0}, settle.Span{Stream: stream, Offset: 0, Count: covered, End: 1})
		}}
	ep, err := benchfix.LayRaggedEpoch(ctx, m, refs, raw, l)
	if err != nil {
		t.Fatal(err)
	}
	if prefixCalls != 1 {
		t.Errorf("CoverPrefix called %d times", prefixCalls)
	}
	if next, err := refs.Next(ctx, stream); err != nil || next != committed-lag {
		t.Errorf("Next = %d, %v; want %d", next, err, committed-lag)
	}
	zones := chain.MustZones(views...)
	f, err := fence.New(m, zones, fence.Options{Identity: "successor"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := settle.New(m, zones, refs, settle.Options{Fencer: f})
	if err != nil {
		t.Fatal(err)
	}
	reps, err := st.SettleAll(ctx, star)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Epoch != ep || reps[0].Covered != lag+4 {
		t.Fatalf("reports %+v, want one of epoch %d covering %d", reps, ep, lag+4)
	}
	if next, err := refs.Next(ctx, stream); err != nil || next != committed+4 {
		t.Errorf("after the takeover Next = %d, %v; want %d", next, err, committed+4)
	}
	if got := benchfix.Count(counted); got.Reads > 1000 {
		t.Errorf("the takeover read %d objects of a synthetic million", got.Reads)
	}
}
