package objstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/cutline/cutline"
)

// VerifyOptions are the optional settings of VerifyZones. The zero value
// works.
type VerifyOptions struct {
	// Prefix puts every probe below "<Prefix>/" + VerifyDir, for
	// credentials that only reach part of a bucket. Empty: at the
	// bucket's root.
	Prefix string
}

// VerifyZones is the start-up check of a zone set, the buckets a host
// writes one chain's slots to: it refuses the set unless every bucket
// enforces create-only writes, one request at a time and under concurrent
// creates (Verify), and the buckets are as many physical stores as
// handles. It is one call so that no host runs one of these checks
// without the others: two handles on one store pass the create-only check
// on each, and only the comparison between them catches the one physical
// copy that would be counted twice.
//
// It refuses a nil bucket, an empty set and two buckets with one name
// before sending anything. It then runs Verify on every bucket, the
// buckets side by side, and reports the first bucket in zone order that
// failed. Last it creates one probe in each bucket, checks that each probe
// is readable through its own bucket and absent (ErrNotFound) from every
// other, and deletes the probes.
//
// Cost for K buckets: K × VerifyRequests requests (29 each, in eight
// rounds, the buckets in parallel), then 2K + K² for the comparison (one
// request at a time). ctx bounds the whole check; a done ctx ends it with
// its error.
//
// Errors: a bucket that lets a second create through is an error matching
// ErrNotCreateOnly; two handles on one store, or one name twice, a
// *AliasError matching ErrAliased; an unreachable bucket an error
// matching ErrUnavailable, never a pass. Every error names the bucket.
// Probes are deleted on every way out while ctx allows.
func VerifyZones(ctx context.Context, zones []Bucket, opts VerifyOptions) error {
	if len(zones) == 0 {
		return &cutline.ConfigError{Field: "zones", Reason: "empty: a zone set has at least one bucket"}
	}
	if err := checkNames(zones); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: verify zones: %w", err)
	}
	errs := make([]error, len(zones))
	var wg sync.WaitGroup
	for i, b := range zones {
		wg.Go(func() { errs[i] = VerifyUnder(ctx, b, opts.Prefix) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return verifyDistinct(ctx, opts.Prefix, zones)
}
