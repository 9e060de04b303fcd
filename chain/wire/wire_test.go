package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
)

func TestWireRoundTrip(t *testing.T) {
	fl := wire.EncodeFlight("star-a", 7, 42, []byte("hello"))
	obj, err := wire.Decode(fl)
	require.NoError(t, err)
	require.Equal(t, wire.KindFlight, obj.Kind)
	require.Equal(t, "star-a", obj.Star)
	require.Equal(t, uint64(7), obj.Epoch)
	require.Equal(t, uint64(42), obj.Slot)
	require.Equal(t, []byte("hello"), obj.Body)
	require.NoError(t, obj.Check("star-a", 7, 42))
	require.ErrorIs(t, obj.Check("star-a", 7, 43), wire.ErrMisplaced)
	require.ErrorIs(t, obj.Check("star-b", 7, 42), wire.ErrMisplaced)

	h, err := wire.DecodeHeader(fl[:min(len(fl), wire.HeaderProbeLen)])
	require.NoError(t, err)
	require.Equal(t, obj.Header, h)
	require.Equal(t, len(fl)-5, h.Len())

	long := bytes.Repeat([]byte("f"), 300)
	po := wire.EncodePoison("star-a", 7, 42, string(long))
	obj, err = wire.Decode(po)
	require.NoError(t, err)
	require.Equal(t, wire.KindPoison, obj.Kind)
	require.Len(t, obj.Body, 256, "the fencer identity is truncated")
	require.Equal(t, "poison", obj.Kind.String())
}

func TestWireDecodeErrors(t *testing.T) {
	good := wire.EncodeFlight("s", 1, 2, []byte("payload"))
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, wire.ErrCorrupt},
		{"short", good[:20], wire.ErrCorrupt},
		{"bad magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), wire.ErrCorrupt},
		{"newer format", mut(func(b []byte) []byte { b[4] = 2; return b }), wire.ErrUnknownFormat},
		{"bad kind", mut(func(b []byte) []byte { b[5] = 9; return b }), wire.ErrCorrupt},
		{"reserved", mut(func(b []byte) []byte { b[7] = 1; return b }), wire.ErrCorrupt},
		{"star length 0", mut(func(b []byte) []byte { b[32] = 0; return b }), wire.ErrCorrupt},
		{"star length 65", mut(func(b []byte) []byte { b[32] = 65; return b }), wire.ErrCorrupt},
		{"truncated star", mut(func(b []byte) []byte { b[32] = 30; return b[:40] }), wire.ErrCorrupt},
		{"truncated body", good[:len(good)-1], wire.ErrCorrupt},
		{"trailing bytes", append(bytes.Clone(good), 0), wire.ErrCorrupt},
		{"checksum", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), wire.ErrCorrupt},
		{"header bit flip", mut(func(b []byte) []byte { b[12] ^= 1; return b }), wire.ErrCorrupt},
		{"huge body length", mut(func(b []byte) []byte { b[24] = 0xff; return b }), wire.ErrCorrupt},
		{"poison body too long", func() []byte {
			b := wire.EncodePoison("s", 1, 2, "x")
			b[26] = 2 // body length 513
			return b
		}(), wire.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wire.Decode(tc.data)
			require.ErrorIs(t, err, tc.want)
			var oe *wire.ObjectError
			require.ErrorAs(t, err, &oe)
			require.NotEmpty(t, oe.Reason)
		})
	}
}

// FuzzDecode: decoding arbitrary bytes never panics and fails with a clear
// *ObjectError; whatever decodes re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(wire.EncodeFlight("star-a", 1, 2, []byte("payload")))
	f.Add(wire.EncodeFlight("s", 0, 0, nil))
	f.Add(wire.EncodePoison("star-a", 9, 3, "fencer-1"))
	f.Add([]byte("CUTL"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, herr := wire.DecodeHeader(data)
		obj, err := wire.Decode(data)
		for _, e := range []error{herr, err} {
			if e == nil {
				continue
			}
			var oe *wire.ObjectError
			if !errors.As(e, &oe) || oe.Reason == "" {
				t.Fatalf("unclear error %v", e)
			}
			if !errors.Is(e, wire.ErrCorrupt) && !errors.Is(e, wire.ErrUnknownFormat) {
				t.Fatalf("error %v matches no wire sentinel", e)
			}
		}
		if herr != nil {
			if err == nil {
				t.Fatal("Decode accepted what DecodeHeader refused")
			}
			return
		}
		if err != nil {
			return
		}
		if h != obj.Header {
			t.Fatalf("headers differ: %+v vs %+v", h, obj.Header)
		}
		var re []byte
		switch obj.Kind {
		case wire.KindFlight:
			re = wire.EncodeFlight(obj.Star, obj.Epoch, obj.Slot, obj.Body)
		case wire.KindPoison:
			re = wire.EncodePoison(obj.Star, obj.Epoch, obj.Slot, string(obj.Body))
		default:
			t.Fatalf("decoded unknown kind %v", obj.Kind)
		}
		if !bytes.Equal(re, data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", re, data)
		}
	})
}

// FuzzEncode: every flight and poison of a valid star decodes to what was
// encoded, and its header decodes from the first HeaderProbeLen bytes.
func FuzzEncode(f *testing.F) {
	f.Add("star-a", uint64(1), uint64(2), []byte("payload"), false)
	f.Add("s", uint64(0), ^uint64(0), []byte{}, true)
	f.Fuzz(func(t *testing.T, star string, ep, slot uint64, body []byte, poison bool) {
		if epoch.ValidateName("star", star) != nil || len(body) > 4096 {
			return
		}
		kind := wire.KindFlight
		data := wire.EncodeFlight(star, ep, slot, body)
		if poison {
			kind = wire.KindPoison
			data = wire.EncodePoison(star, ep, slot, string(body))
			if len(body) > 256 {
				body = body[:256]
			}
		}
		obj, err := wire.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if obj.Kind != kind || obj.Star != star || obj.Epoch != ep || obj.Slot != slot || !bytes.Equal(obj.Body, body) {
			t.Fatalf("round trip changed the object: %+v", obj)
		}
		h, err := wire.DecodeHeader(data[:min(len(data), wire.HeaderProbeLen)])
		if err != nil || h != obj.Header {
			t.Fatalf("header probe: %+v, %v", h, err)
		}
	})
}
