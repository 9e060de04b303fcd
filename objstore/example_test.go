package objstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/mem"
)

// The create-only contract: the first Create wins, every later one gets
// ErrExists and changes nothing.
func Example() {
	ctx := context.Background()
	var b objstore.Bucket = mem.New("zone-a")

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
	if err := objstore.Verify(ctx, mem.New("zone-a")); err != nil {
		fmt.Println("refused:", err)
		return
	}
	fmt.Println("zone-a enforces create-only writes")
	// Output:
	// zone-a enforces create-only writes
}

func ExampleAll() {
	ctx := context.Background()
	b := mem.New("zone-a")
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
