package objstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

// The create-only contract: the first Create wins, every later one gets
// ErrExists and changes nothing.
func Example() {
	ctx := context.Background()
	var b objstore.Bucket = memblob.New("zone-a")

	fmt.Println(b.Create(ctx, "p/star-1/00000001/00000000", []byte("flight")))
	err := b.Create(ctx, "p/star-1/00000001/00000000", []byte("poison"))
	fmt.Println(errors.Is(err, objstore.ErrExists))

	data, _ := b.Get(ctx, "p/star-1/00000001/00000000")
	fmt.Println(string(data))

	_, err = b.Get(ctx, "p/star-1/00000001/00000001")
	fmt.Println(errors.Is(err, objstore.ErrNotFound))
	// Output:
	// <nil>
	// true
	// flight
	// true
}

func ExampleVerify() {
	ctx := context.Background()
	if err := objstore.Verify(ctx, memblob.New("zone-a")); err != nil {
		fmt.Println("refused:", err)
		return
	}
	fmt.Println("zone-a enforces create-only writes")
	// Output:
	// zone-a enforces create-only writes
}

// A zone set must be as many physical stores as buckets. Here one store is
// listed twice under two names, so a write acknowledged by two zones would
// have one copy.
func ExampleVerifyDistinct() {
	ctx := context.Background()
	a, b := memblob.New("zone-a"), memblob.New("zone-b")
	fmt.Println(objstore.VerifyDistinct(ctx, a, b))

	err := objstore.VerifyDistinct(ctx, a, b, sameStore{a, "zone-c"})
	var alias *objstore.AliasError
	if errors.As(err, &alias) {
		fmt.Println(errors.Is(err, objstore.ErrAliased), alias.A, alias.B)
	}
	// Output:
	// <nil>
	// true zone-a zone-c
}

// The one start-up check of a zone set: every bucket create-only, one
// request at a time and under concurrent creates, and as many stores as
// buckets.
func ExampleVerifyZones() {
	ctx := context.Background()
	a, b, c := memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")
	fmt.Println(objstore.VerifyZones(ctx, []objstore.Bucket{a, b, c}, objstore.VerifyOptions{}))

	// zone-c is zone-a again: each passes alone, the set does not.
	err := objstore.VerifyZones(ctx, []objstore.Bucket{a, b, sameStore{a, "zone-c"}}, objstore.VerifyOptions{})
	fmt.Println(errors.Is(err, objstore.ErrAliased))
	fmt.Println(objstore.VerifyRequests, "requests per bucket")
	// Output:
	// <nil>
	// true
	// 29 requests per bucket
}

// sameStore is a second handle on a store under another name.
type sameStore struct {
	objstore.Bucket
	name string
}

func (s sameStore) Name() string { return s.name }

func ExampleAll() {
	ctx := context.Background()
	b := memblob.New("zone-a")
	for _, k := range []string{"p/s/2", "p/s/1", "q/x", "p/s/3"} {
		_ = b.Create(ctx, k, []byte(k))
	}
	for o, err := range objstore.All(ctx, b, "p/") {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(o.Key, o.Size)
	}
	// Output:
	// p/s/1 5
	// p/s/2 5
	// p/s/3 5
}

func ExampleValidateKey() {
	fmt.Println(objstore.ValidateKey("p/star-1/00000001/00000000"))
	fmt.Println(objstore.ValidateKey("p/../etc/passwd"))
	// Output:
	// <nil>
	// objstore: invalid key "p/../etc/passwd": ".." path segment
}

// A backend maps its client's error onto a sentinel; callers test the
// sentinel whatever the backend, and still reach the client's error.
func ExampleClassify() {
	sdkErr := errors.New("403 Forbidden: AccessDenied")
	err := &objstore.OpError{Op: "get", Bucket: "zone-a", Key: "k",
		Err: objstore.Classify(objstore.ErrAccessDenied, sdkErr)}
	fmt.Println(err)
	fmt.Println(errors.Is(err, objstore.ErrAccessDenied), errors.Is(err, objstore.ErrNotFound), errors.Is(err, sdkErr))
	// Output:
	// objstore get zone-a/k: objstore: access denied: 403 Forbidden: AccessDenied
	// true false true
}

// A re-sent Create was refused as "exists": reading the key back tells
// whether the object is the caller's own earlier attempt.
func ExampleReadBack() {
	ctx := context.Background()
	b := memblob.New("zone-a")
	_ = b.Create(ctx, "k", []byte("mine")) // the first attempt landed; its answer was lost
	refusal := errors.New("412 Precondition Failed")

	fmt.Println(objstore.ReadBack(ctx, b, "k", []byte("mine"), refusal))
	err := objstore.ReadBack(ctx, b, "k", []byte("other"), refusal)
	fmt.Println(errors.Is(err, objstore.ErrExists))
	err = objstore.ReadBack(ctx, b, "gone", []byte("mine"), refusal)
	fmt.Println(errors.Is(err, objstore.ErrUnavailable))
	// Output:
	// <nil>
	// true
	// true
}
