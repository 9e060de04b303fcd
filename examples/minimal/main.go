// Command minimal is a whole cutline host in one file, on in-memory
// stores: a star opens three streams and appends to them, crashes with
// acknowledged records not yet in its index, a successor takes every
// stream over (fencing and settling the dead star's epoch once), appends
// more, and every acknowledged record is read back exactly once.
//
//	go run ./examples/minimal
//
// A real host swaps the stores for etcd and S3 (or GCS, Azure, fs).
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/settle"
)

var streams = []string{"orders", "payments", "audit"}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "minimal:", err)
		os.Exit(1)
	}
}

// locate is the host's payload format, "<stream>|<offset>|<data>": one
// record per flight. It tells the index which stream offsets a flight
// carries and which bytes hold them.
func locate(p []byte) ([]settle.Span, error) {
	parts := bytes.SplitN(p, []byte("|"), 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a record: %q", p)
	}
	off, err := strconv.ParseUint(string(parts[1]), 10, 64)
	if err != nil {
		return nil, err
	}
	return []settle.Span{{Stream: string(parts[0]), Offset: off, Count: 1, End: uint64(len(p))}}, nil
}

// host is one process: a star over the shared stores, its session, and
// the index it covers records in.
type host struct {
	star *lease.Star
	sess metastore.Session
	refs *settle.RefIndex
}

func start(ctx context.Context, name string, store metastore.Store, zones chain.Zones, c epoch.Constants) (*host, error) {
	minter, err := epoch.NewMinter(store, epoch.Options{Identity: name})
	if err != nil {
		return nil, err
	}
	fencer, err := fence.New(minter, zones, fence.Options{Identity: name})
	if err != nil {
		return nil, err
	}
	refs, err := settle.NewRefIndex(store, "", locate)
	if err != nil {
		return nil, err
	}
	settler, err := settle.New(minter, zones, refs, settle.Options{Fencer: fencer})
	if err != nil {
		return nil, err
	}
	sess, err := store.NewSession(ctx, 10*time.Second)
	if err != nil {
		return nil, err
	}
	star, err := lease.Start(ctx, lease.Config{Star: name, Store: store, Session: sess,
		Minter: minter, Settler: settler, Index: refs, Constants: c}, lease.Options{})
	if err != nil {
		_ = sess.Close(ctx)
		return nil, err
	}
	return &host{star: star, sess: sess, refs: refs}, nil
}

// openAll opens every stream in bulk and reports how each was admitted.
func (h *host) openAll(ctx context.Context, out io.Writer) error {
	tens, errs := h.star.OpenMany(ctx, streams, lease.OpenOptions{})
	for i, err := range errs {
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s opened %s: %s, next offset %d\n", h.star.Name(), streams[i], tens[i].Decision, tens[i].Next)
	}
	return nil
}

// append appends n records to every stream and waits for each
// acknowledgement: a record is the producer's only once it is acked.
func (h *host) append(ctx context.Context, n int) error {
	for i := range n {
		for _, s := range streams {
			next, err := h.star.Next(s)
			if err != nil {
				return err
			}
			f, err := h.star.Submit(ctx, fmt.Appendf(nil, "%s|%d|%s record %d", s, next, h.star.Name(), i))
			if err != nil {
				return err
			}
			if _, err := f.Wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func run(ctx context.Context, out io.Writer) error {
	store := memstore.New(memstore.Options{})
	buckets := []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
	// Every zone must refuse a second create, under concurrency too, and
	// be a store of its own: the fence rests on it.
	if err := objstore.VerifyZones(ctx, buckets, objstore.VerifyOptions{}); err != nil {
		return err
	}
	zones := chain.MustZones(buckets...)
	c := epoch.Constants{Class: "standard", Buckets: chain.Names(buckets...), W: 2, Window: 16}

	a, err := start(ctx, "star-a", store, zones, c)
	if err != nil {
		return err
	}
	if err := a.openAll(ctx, out); err != nil {
		return err
	}
	if err := a.append(ctx, 3); err != nil {
		return err
	}
	_, pending := a.star.Absorbed()
	// A crash: no departure, no mark, acknowledged records not indexed.
	a.star.Abort()
	if err := a.sess.Close(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "star-a crashed with %d acknowledged flights not in its index\n", pending)

	b, err := start(ctx, "star-b", store, zones, c)
	if err != nil {
		return err
	}
	if err := b.openAll(ctx, out); err != nil {
		return err
	}
	if err := b.append(ctx, 2); err != nil {
		return err
	}
	if err := errors.Join(b.star.Close(ctx), b.sess.Close(ctx)); err != nil {
		return err
	}

	// Read every stream back through the index and the chain.
	minter, err := epoch.NewMinter(store, epoch.Options{Identity: "reader"})
	if err != nil {
		return err
	}
	reader, err := chain.NewReader(minter, zones, chain.ReaderOptions{})
	if err != nil {
		return err
	}
	for _, s := range streams {
		var recs []string
		for r, err := range b.refs.Refs(ctx, s) {
			if err != nil {
				return err
			}
			p, err := reader.Read(ctx, r.Star, r.Position())
			if err != nil {
				return err
			}
			recs = append(recs, string(bytes.SplitN(p[r.Start:r.End], []byte("|"), 3)[2]))
		}
		if len(recs) != 5 {
			return fmt.Errorf("stream %s: read %d records back, 5 were acknowledged", s, len(recs))
		}
		fmt.Fprintf(out, "%s: %q\n", s, recs)
	}
	return nil
}
