// Command takeover demonstrates a takeover on object storage, end to end,
// with nothing to install:
//
//	go run ./examples/takeover
//
// A tiny broker (the host) serves the stream "orders" from star-a's chain
// through a lease.Star: three zones (filesystem buckets in a temporary
// directory, a few milliseconds of injected latency), K=3, W=2, window 64,
// metadata in an in-memory metastore. A producer sends records with its own
// sequence numbers. Star-a acknowledges a few hundred, loses two zones, and
// dies with appends in flight (Star.Abort: no Finish, no clean-release
// mark); its PUTs that were held up in the network land later, like a
// zombie's. Star-b's open passes the gate only once star-a's session has
// ended (before that it is deferred: star-a's lease is held); the gate
// finds star-a's epoch unmarked, fences and settles it, and star-b
// continues the stream where settlement says it continues, and serves the
// producer's retries without duplicating anything. Star-b shuts down
// through Star.Close, which stamps the clean-release mark. The program
// prints the timeline and ends by reading the stream back: every
// acknowledged record must be readable exactly once. It exits with status
// 1 if anything did not hold.
//
// Flags point it at real services instead of the embedded defaults:
//
//	go run ./examples/takeover -etcd 127.0.0.1:2379 \
//	    -s3-endpoint http://127.0.0.1:7070 -s3-buckets zone-a,zone-b,zone-c \
//	    -s3-access-key KEY -s3-secret-key SECRET
//
// -s3-endpoint takes one URL for all buckets or one per bucket (a server
// per zone). The S3 client uses path-style addressing. On the in-memory
// metastore, star-a's session is expired on demand once the gate has
// deferred star-b; on etcd it runs out its TTL (-session-ttl, 2s by
// default) and star-b tries the open again every 100ms until the gate
// admits it. Other flags change the shape (-k, -w, -window, -records,
// -crash-after, -inflight, -absorb-every, -latency); -h lists them with
// their ranges. A value out of range, -inflight above -window, or a bucket
// named twice in -s3-buckets is refused before anything starts.
//
// A run is reproducible: the same flags print the same lines with the same
// counts every time; only the times, the run ID and the directory differ.
// Nothing the run counts is left to timing:
//
//   - Which of star-a's PUTs are held up follows from the flags: in the
//     zones it loses, the PUT of every in-flight slot; in the zones it
//     still reaches, that of the hole slot, two fifths into the in-flight
//     appends. A held-up PUT gets no answer before star-a dies, so star-a
//     sends exactly one per zone and slot and never retries it.
//   - Before star-a loses zones, every zone has its copy of each
//     acknowledged slot and the Star's absorbs have finished. The producer
//     sends star-a one absorb batch (-absorb-every records) at a time, and
//     the next once the Star has absorbed it, so that every absorb covers
//     exactly one batch. A PUT that passed is not recalled when star-a
//     dies.
//   - The final verification reads one slot at a time, so it sends no
//     read-ahead requests past the end of star-b's open epoch.
//
// A zone that fails a request breaks this: star-a's retries, and what they
// change, depend on timing.
//
// -seed seeds the injected latency and nothing else. Each party's view of
// each zone draws its delays from its own generator, seeded with -seed plus
// the zone's position, so a seed always draws the same sequence of delays.
// Which request gets which delay follows the order in which concurrent
// requests arrive, which the Go scheduler decides, and the times printed
// are wall-clock times: they vary from run to run whatever the seed. The
// counts do not depend on the seed.
//
// Each run writes under its own key prefix and metastore root, which it
// prints, so runs against the same services never meet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "takeover: FAILED:", err)
		os.Exit(1)
	}
}

// run runs the demonstration with the flags in args, printing to out. It
// returns an error if the demonstration failed or anything it checks did
// not hold.
func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	be, err := openBackends(ctx, cfg)
	if err != nil {
		return err
	}
	defer be.close()
	d := newDemo(cfg, be, out)
	return d.run(ctx)
}
