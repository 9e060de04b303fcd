package metastore

import (
	"context"
	"errors"
	"fmt"
)

// MaxReadMany is the most reads ReadMany sends in one request: etcd's
// default bound on the operations of one transaction.
const MaxReadMany = 128

// Read is one read of a ReadMany: the value of Key, or with Floor set, the
// last key under Prefix that is ≤ Key (see Floorer).
type Read struct {
	Key    string
	Floor  bool
	Prefix string
}

// ReadResult is the answer to one Read: the key's value and revisions,
// and whether there was one (a missing key is not an error).
type ReadResult struct {
	KV    KV
	Found bool
}

// ManyReader is an optional capability of a Store: many reads in one
// request, all at one revision. Opening or taking over thousands of
// streams reads a few keys per stream; one request per key would make
// the store's per-request cost the takeover's.
type ManyReader interface {
	// ReadMany answers reads (at most MaxReadMany) in one linearizable
	// request, in order.
	ReadMany(ctx context.Context, reads []Read) ([]ReadResult, error)
}

// CheckRead validates a Read; backends call it before they send.
func CheckRead(r Read) error {
	if r.Floor {
		return CheckFloor(r.Prefix, r.Key)
	}
	return ValidateKey(r.Key)
}

// ReadMany answers reads in order: through the store's ManyReader in
// requests of MaxReadMany reads when it has one, otherwise one Get or
// Floor per read.
func ReadMany(ctx context.Context, s Store, reads []Read) ([]ReadResult, error) {
	for _, r := range reads {
		if err := CheckRead(r); err != nil {
			return nil, err
		}
	}
	out := make([]ReadResult, 0, len(reads))
	if mr, ok := s.(ManyReader); ok {
		for from := 0; from < len(reads); from += MaxReadMany {
			res, err := mr.ReadMany(ctx, reads[from:min(len(reads), from+MaxReadMany)])
			if err != nil {
				return nil, err
			}
			out = append(out, res...)
		}
		return out, nil
	}
	for _, r := range reads {
		var kv KV
		var err error
		if r.Floor {
			kv, err = Floor(ctx, s, r.Prefix, r.Key)
		} else {
			kv, err = s.Get(ctx, r.Key)
		}
		switch {
		case err == nil:
			out = append(out, ReadResult{KV: kv, Found: true})
		case errors.Is(err, ErrNotFound):
			out = append(out, ReadResult{})
		default:
			return nil, err
		}
	}
	return out, nil
}

// CheckMany validates the reads of one ManyReader request: at most
// MaxReadMany of them, each valid. Backends call it before they send.
func CheckMany(reads []Read) error {
	if len(reads) > MaxReadMany {
		return fmt.Errorf("metastore read many: %d reads, at most %d: %w", len(reads), MaxReadMany, ErrInvalidKey)
	}
	for _, r := range reads {
		if err := CheckRead(r); err != nil {
			return err
		}
	}
	return nil
}
