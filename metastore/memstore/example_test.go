package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// A compare-and-set on a counter: the second writer that read the same
// revision loses and learns the current revision.
func Example() {
	ctx := context.Background()
	st := memstore.New(memstore.Options{})

	rev, _ := metastore.Put(ctx, st, "chains/a", []byte("1"), 0)
	kv, _ := st.Get(ctx, "chains/a")
	fmt.Printf("%s at revision %d\n", kv.Value, kv.Revision)

	_, _ = metastore.Put(ctx, st, "chains/a", []byte("2"), rev)
	_, err := metastore.Put(ctx, st, "chains/a", []byte("2"), rev)
	var ce *metastore.ConflictError
	if errors.As(err, &ce) {
		fmt.Printf("lost: expected %d, current %d\n", ce.Expected, ce.Revision)
	}
	// Output:
	// 1 at revision 1
	// lost: expected 1, current 2
}

// A key bound to a session vanishes when the session expires: here a
// suspended session runs out its TTL on a fake clock.
func ExampleStore_Suspend() {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(0, 0))
	st := memstore.New(memstore.Options{Clock: clk})

	sess, _ := st.NewSession(ctx, 10*time.Second)
	_, _ = metastore.PutBound(ctx, st, sess, "stars/a", []byte("alive"), 0)

	st.Suspend(sess) // keep-alives stop, as in a partition
	clk.Advance(10 * time.Second)
	<-sess.Done()

	_, err := st.Get(ctx, "stars/a")
	fmt.Println(errors.Is(err, metastore.ErrNotFound))
	// Output: true
}

// Watch replays history from a revision, then follows live changes.
func ExampleStore_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := memstore.New(memstore.Options{})

	first, _ := metastore.Put(ctx, st, "streams/s1/writer", []byte("a"), 0)
	_ = metastore.Delete(ctx, st, "streams/s1/writer", first)

	for ev, err := range st.Watch(ctx, "streams/", first) {
		if err != nil {
			break
		}
		fmt.Println(ev.Type, ev.KV.Key, ev.KV.Revision)
		if ev.Type == metastore.EventDelete {
			break
		}
	}
	// Output:
	// put streams/s1/writer 1
	// delete streams/s1/writer 2
}

// A transaction moves a value between two keys atomically.
func ExampleStore_Txn() {
	ctx := context.Background()
	st := memstore.New(memstore.Options{})
	ra, _ := metastore.Put(ctx, st, "a", []byte("token-7"), 0)

	rev, err := st.Txn(ctx, metastore.Txn{
		If:   []metastore.Compare{{Key: "a", Revision: ra}, {Key: "b", Revision: 0}},
		Then: []metastore.Op{{Key: "a", Delete: true}, {Key: "b", Value: []byte("token-7")}},
	})
	fmt.Println(rev, err)
	kvs, _, _ := st.List(ctx, "")
	for _, kv := range kvs {
		fmt.Printf("%s=%s\n", kv.Key, kv.Value)
	}
	// Output:
	// 2 <nil>
	// b=token-7
}
