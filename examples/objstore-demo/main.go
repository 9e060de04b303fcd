// Command objstore-demo shows create-only writes on three filesystem
// buckets (three zones) in a temporary directory: each bucket is verified,
// a flight is created in every zone, a second create (a fencer's poison) is
// refused, eight racing creators produce exactly one winner, and the
// objects are read back and listed. It exits with status 1 if any of that
// does not hold.
//
//	go run ./examples/objstore-demo
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "objstore-demo: FAILED:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "cutline-objstore-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(w, "three zones under %s\n", dir)

	var zones []*fs.Bucket
	for _, name := range []string{"zone-a", "zone-b", "zone-c"} {
		b, err := fs.New(filepath.Join(dir, name), fs.Options{CreateRoot: true})
		if err != nil {
			return err
		}
		defer b.Close()
		if err := objstore.Verify(ctx, b); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: verified: the bucket enforces create-only writes\n", name)
		zones = append(zones, b)
	}

	if err := objstore.VerifyDistinct(ctx, zones[0], zones[1], zones[2]); err != nil {
		return err
	}
	fmt.Fprintln(w, "zone-a, zone-b, zone-c: verified: three distinct stores")

	const key = "demo/star-1/00000000000000000001/00000000000000000000"
	flight, poison := []byte("flight: epoch 1, slot 0"), []byte("poison")
	for _, b := range zones {
		if err := b.Create(ctx, key, flight); err != nil {
			return fmt.Errorf("create flight: %w", err)
		}
		fmt.Fprintf(w, "%s: create %s: ok\n", b.Name(), key)
	}
	for _, b := range zones {
		err := b.Create(ctx, key, poison)
		if !errors.Is(err, objstore.ErrExists) {
			return fmt.Errorf("%s: second create answered %v, want ErrExists", b.Name(), err)
		}
		fmt.Fprintf(w, "%s: second create (poison): refused, already exists\n", b.Name())
	}

	winners, err := race(ctx, zones[0], "demo/race", 8)
	if err != nil {
		return err
	}
	if len(winners) != 1 {
		return fmt.Errorf("%s: %d of 8 racing creators won, want exactly 1", zones[0].Name(), len(winners))
	}
	fmt.Fprintf(w, "%s: 8 racing creators, exactly one winner (creator %d)\n", zones[0].Name(), winners[0])

	for _, b := range zones {
		got, err := b.Get(ctx, key)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, flight) {
			return fmt.Errorf("%s: read back %q, want %q", b.Name(), got, flight)
		}
		fmt.Fprintf(w, "%s: read back %q\n", b.Name(), got)
	}

	for o, err := range objstore.All(ctx, zones[0], "demo/") {
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: list: %s (%d bytes)\n", zones[0].Name(), o.Key, o.Size)
	}
	fmt.Fprintln(w, "ok: create-only holds in every zone")
	return nil
}

// race lets n creators create key at once and returns the winners.
func race(ctx context.Context, b objstore.Bucket, key string, n int) ([]int, error) {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = b.Create(ctx, key, fmt.Appendf(nil, "creator %d", i))
		})
	}
	close(start)
	wg.Wait()
	var winners []int
	for i, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, i)
		case !errors.Is(err, objstore.ErrExists):
			return nil, fmt.Errorf("%s: creator %d: %w", b.Name(), i, err)
		}
	}
	return winners, nil
}
