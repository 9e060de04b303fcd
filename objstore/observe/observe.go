package observe

import (
	"context"
	"errors"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/objstore"
)

// Op names a request by its Bucket method.
type Op string

// The requests of objstore.Bucket (Name is none).
const (
	Create   Op = "create"
	Get      Op = "get"
	GetRange Op = "get_range"
	Delete   Op = "delete"
	List     Op = "list"
)

// Func is told of one request once it returns. It is called from the
// requests' goroutines, concurrently, and should be quick.
type Func func(bucket string, op Op, err error)

// Wrap returns b with every request reported to f. A nil b or f is a
// *cutline.ConfigError.
func Wrap(b objstore.Bucket, f Func) (objstore.Bucket, error) {
	if b == nil {
		return nil, &cutline.ConfigError{Field: "bucket", Value: nil, Reason: "required"}
	}
	if f == nil {
		return nil, &cutline.ConfigError{Field: "observer", Value: nil, Reason: "required"}
	}
	return &bucket{Bucket: b, f: f}, nil
}

// Outcome is a request's result in one word: ok, not_found
// (objstore.ErrNotFound), exists (objstore.ErrExists), canceled
// (context.Canceled) or error.
func Outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, objstore.ErrNotFound):
		return "not_found"
	case errors.Is(err, objstore.ErrExists):
		return "exists"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}

type bucket struct {
	objstore.Bucket
	f Func
}

func (b *bucket) done(op Op, err error) error {
	b.f(b.Name(), op, err)
	return err
}

func (b *bucket) Create(ctx context.Context, key string, data []byte) error {
	return b.done(Create, b.Bucket.Create(ctx, key, data))
}

func (b *bucket) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := b.Bucket.Get(ctx, key)
	return data, b.done(Get, err)
}

func (b *bucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	data, err := b.Bucket.GetRange(ctx, key, offset, length)
	return data, b.done(GetRange, err)
}

func (b *bucket) Delete(ctx context.Context, key string) error {
	return b.done(Delete, b.Bucket.Delete(ctx, key))
}

func (b *bucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	out, err := b.Bucket.List(ctx, prefix, startAfter, limit)
	return out, b.done(List, err)
}
