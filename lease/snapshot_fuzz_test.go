package lease

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/cutline/cutline/metastore"
)

// The snapshot decoder refuses whatever is not a sound record with
// ErrBadSnapshot, and whatever it accepts is self-consistent and
// survives another round trip unchanged.
func FuzzDecodeSnapshot(f *testing.F) {
	good := func(data []byte) []byte {
		v, err := encode(&Snapshot{RecordHeader: hdr(snapshotKind), Stream: "orders", Star: "star-a", Tenure: 3, Offset: 42,
			Size: len(data), Sum: crc32.Checksum(data, castagnoli), Data: data})
		if err != nil {
			f.Fatal(err)
		}
		return v
	}
	f.Add(good([]byte("producer table")))
	f.Add(good(nil))
	f.Add([]byte(`{"kind":"stream-snapshot","format":1,"stream":"orders","star":"star-a","tenure":1,"offset":1,"size":1,"crc32c":0,"data":"AA=="}`))
	f.Add([]byte(`{"kind":"stream-snapshot","format":2}`))
	f.Add([]byte("not json"))
	f.Add([]byte{})
	const key = "streams/orders/snapshot"
	f.Fuzz(func(t *testing.T, value []byte) {
		sn, err := decodeSnapshot(metastore.KV{Key: key, Value: value, Revision: 7}, "orders")
		if err != nil {
			var se *SnapshotError
			if !errors.Is(err, ErrBadSnapshot) || !errors.As(err, &se) || se.Stream != "orders" {
				t.Fatalf("a refusal that is not a *SnapshotError for ErrBadSnapshot: %v", err)
			}
			return
		}
		if sn.Stream != "orders" || sn.Tenure == 0 || sn.Size != len(sn.Data) || crc32.Checksum(sn.Data, castagnoli) != sn.Sum || sn.Revision != 7 {
			t.Fatalf("accepted an inconsistent snapshot: %+v", sn)
		}
		again, err := encode(sn)
		if err != nil {
			t.Fatal(err)
		}
		sn2, err := decodeSnapshot(metastore.KV{Key: key, Value: again, Revision: 7}, "orders")
		if err != nil {
			t.Fatalf("a re-encoded snapshot does not decode: %v", err)
		}
		if sn2.Offset != sn.Offset || sn2.Star != sn.Star || sn2.Tenure != sn.Tenure || !bytes.Equal(sn2.Data, sn.Data) {
			t.Fatalf("the round trip changed it: %+v, then %+v", sn, sn2)
		}
	})
}
