//go:build unix

package fs_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "fs-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	b, err := fs.New(dir, fs.Options{Name: "zone-a"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	key := "chains/star-1/00000001/00000000"
	fmt.Println("first create:", b.Create(ctx, key, []byte("flight")))
	err = b.Create(ctx, key, []byte("poison"))
	fmt.Println("second create exists:", errors.Is(err, objstore.ErrExists))
	data, _ := b.Get(ctx, key)
	fmt.Printf("read back: %s\n", data)
	raw, _ := os.ReadFile(b.Root() + "/" + key)
	fmt.Printf("on disk: %s\n", raw)
	// Output:
	// first create: <nil>
	// second create exists: true
	// read back: flight
	// on disk: flight
}
