package node

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/settle"
)

// A record survives its encoding whatever its bytes; anything else is
// refused, never misread.
func TestRecordFormat(t *testing.T) {
	for _, r := range []Record{
		{Stream: "orders", Offset: 7, Producer: "p-1", Seq: 42, Data: []byte("hello")},
		{Stream: "s", Offset: 1 << 63, Data: []byte{0, 0xff, '\n', 'c', 'b', 'r', '1'}},
		{Stream: "empty", Data: []byte{}},
	} {
		p := r.Encode()
		got, err := decodeRecord(p)
		require.NoError(t, err)
		require.Equal(t, r, got)
		spans, err := Locate(p)
		require.NoError(t, err)
		require.Equal(t, []settle.Span{{Stream: r.Stream, Offset: r.Offset, Count: 1, End: uint64(len(p))}}, spans)
	}
	full := Record{Stream: "orders", Offset: 3, Producer: "p", Seq: 1, Data: []byte("x")}.Encode()
	for _, bad := range [][]byte{nil, []byte("cbr"), []byte("cbr2xxxx"), []byte("orders|3|x"), full[:len(magic)+3], full[:len(full)-2]} {
		_, err := decodeRecord(bad)
		require.ErrorIs(t, err, errBadRecord, "%q", bad)
	}
}
