package objstore

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"

	"github.com/cutline/cutline/clock"
)

// Resender is the create loop of a backend whose client sends each upload
// once and leaves re-sending to the caller: every attempt is then known,
// and a refusal as "exists" after an attempt whose outcome was unknown is
// settled by reading the key back (ReadBack). Backends with a client that
// re-sends on its own (the AWS SDK's retryer) count the client's attempts
// instead and call ReadBack themselves.
//
// The zero value re-sends nothing; the fields are the backend's options.
type Resender struct {
	// Bucket is read back through, and names the bucket in errors and
	// logs.
	Bucket Bucket
	// Kind names the backend in log records ("gcs", "azblob").
	Kind string
	// Retries bounds how often one Create re-sends an upload whose
	// outcome was unknown.
	Retries int
	// Backoff spaces the re-sends on Clock, jittered so that racing
	// creators spread out.
	Backoff clock.Backoff
	Clock   clock.Clock
	// Logger receives a debug record per re-send and a warning per
	// read-back. Nil: discard.
	Logger *slog.Logger
}

// Resender is the Resender of r's bucket b: it re-sends as r's options
// say and logs as r.Kind.
func (r Remote) Resender(b Bucket) Resender {
	return Resender{Bucket: b, Kind: r.Kind, Retries: r.Retries, Backoff: r.Backoff, Clock: r.Clock, Logger: r.Logger}
}

// Create runs send until it answers, re-sending it while its outcome is
// unknown. classify maps send's error onto this package's sentinels
// (ContextEnded once ctx has ended). The outcome, as an *OpError of
// operation "create":
//
//   - send succeeded: nil;
//   - ErrExists on the first attempt, or after attempts that were each
//     refused outright: ErrExists;
//   - ErrExists after an attempt whose outcome was unknown: the key is
//     read back (ReadBack): our bytes are a success;
//   - ErrUnavailable: re-sent up to Retries times; then the key is read
//     back (SettleUnknown): our bytes are a success, other bytes
//     ErrExists, else ErrUnavailable;
//   - ErrNotFound: a create cannot miss its object, so the container or
//     bucket is gone: ErrNoSuchBucket;
//   - anything else: classify's error.
func (r Resender) Create(ctx context.Context, key string, data []byte, send func(context.Context) error, classify func(context.Context, error) error) error {
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fail := func(err error) error { return &OpError{Op: "create", Bucket: r.Bucket.Name(), Key: key, Err: err} }
	ambiguous := false // an earlier attempt may have landed
	for retry := 0; ; retry++ {
		err := send(ctx)
		if err == nil {
			return nil
		}
		cerr := classify(ctx, err)
		switch {
		case errors.Is(cerr, ErrExists):
			if !ambiguous {
				return fail(cerr)
			}
			log.WarnContext(ctx, r.Kind+" create: the object exists after a re-sent upload; reading it back",
				"bucket", r.Bucket.Name(), "key", key, "attempts", retry+1)
			if err := ReadBack(ctx, r.Bucket, key, data, err); err != nil {
				return fail(err)
			}
			return nil
		case errors.Is(cerr, ErrUnavailable):
			ambiguous = true
			if retry >= r.Retries {
				if serr := SettleUnknown(ctx, r.Bucket, key, data, err, cerr); serr != nil {
					return fail(serr)
				}
				return nil
			}
			d := r.Backoff.Delay(retry, rand.Uint64())
			log.DebugContext(ctx, r.Kind+" create: outcome unknown, re-sending",
				"bucket", r.Bucket.Name(), "key", key, "retry", retry+1, "backoff", d, "err", err)
			if serr := clock.Sleep(ctx, clock.Or(r.Clock), d); serr != nil {
				return fail(ContextEnded(serr, err))
			}
		case errors.Is(cerr, ErrNotFound):
			return fail(Classify(ErrNoSuchBucket, err))
		default:
			return fail(cerr)
		}
	}
}
