package chain_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/epoch"
)

func TestWireRoundTrip(t *testing.T) {
	fl := chain.EncodeFlight("star-a", 7, 42, []byte("hello"))
	obj, err := chain.Decode(fl)
	require.NoError(t, err)
	require.Equal(t, chain.KindFlight, obj.Kind)
	require.Equal(t, "star-a", obj.Star)
	require.Equal(t, uint64(7), obj.Epoch)
	require.Equal(t, uint64(42), obj.Slot)
	require.Equal(t, []byte("hello"), obj.Body)
	require.NoError(t, obj.Check("star-a", 7, 42))
	require.ErrorIs(t, obj.Check("star-a", 7, 43), chain.ErrMisplaced)
	require.ErrorIs(t, obj.Check("star-b", 7, 42), chain.ErrMisplaced)

	h, err := chain.DecodeHeader(fl[:min(len(fl), chain.HeaderProbeLen)])
	require.NoError(t, err)
	require.Equal(t, obj.Header, h)
	require.Equal(t, len(fl)-5, h.Len())

	long := bytes.Repeat([]byte("f"), 300)
	po := chain.EncodePoison("star-a", 7, 42, string(long))
	obj, err = chain.Decode(po)
	require.NoError(t, err)
	require.Equal(t, chain.KindPoison, obj.Kind)
	require.Len(t, obj.Body, 256, "the fencer identity is truncated")
	require.Equal(t, "poison", obj.Kind.String())
}

func TestWireDecodeErrors(t *testing.T) {
	good := chain.EncodeFlight("s", 1, 2, []byte("payload"))
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, chain.ErrCorrupt},
		{"short", good[:20], chain.ErrCorrupt},
		{"bad magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), chain.ErrCorrupt},
		{"newer format", mut(func(b []byte) []byte { b[4] = 2; return b }), chain.ErrUnknownFormat},
		{"bad kind", mut(func(b []byte) []byte { b[5] = 9; return b }), chain.ErrCorrupt},
		{"reserved", mut(func(b []byte) []byte { b[7] = 1; return b }), chain.ErrCorrupt},
		{"star length 0", mut(func(b []byte) []byte { b[32] = 0; return b }), chain.ErrCorrupt},
		{"star length 65", mut(func(b []byte) []byte { b[32] = 65; return b }), chain.ErrCorrupt},
		{"truncated star", mut(func(b []byte) []byte { b[32] = 30; return b[:40] }), chain.ErrCorrupt},
		{"truncated body", good[:len(good)-1], chain.ErrCorrupt},
		{"trailing bytes", append(bytes.Clone(good), 0), chain.ErrCorrupt},
		{"checksum", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), chain.ErrCorrupt},
		{"header bit flip", mut(func(b []byte) []byte { b[12] ^= 1; return b }), chain.ErrCorrupt},
		{"huge body length", mut(func(b []byte) []byte { b[24] = 0xff; return b }), chain.ErrCorrupt},
		{"poison body too long", func() []byte {
			b := chain.EncodePoison("s", 1, 2, "x")
			b[26] = 2 // body length 513
			return b
		}(), chain.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := chain.Decode(tc.data)
			require.ErrorIs(t, err, tc.want)
			var oe *chain.ObjectError
			require.ErrorAs(t, err, &oe)
			require.NotEmpty(t, oe.Reason)
		})
	}
}

// FuzzDecode: decoding arbitrary bytes never panics and fails with a clear
// *ObjectError; whatever decodes re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(chain.EncodeFlight("star-a", 1, 2, []byte("payload")))
	f.Add(chain.EncodeFlight("s", 0, 0, nil))
	f.Add(chain.EncodePoison("star-a", 9, 3, "fencer-1"))
	f.Add([]byte("CUTL"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, herr := chain.DecodeHeader(data)
		obj, err := chain.Decode(data)
		for _, e := range []error{herr, err} {
			if e == nil {
				continue
			}
			var oe *chain.ObjectError
			if !errors.As(e, &oe) || oe.Reason == "" {
				t.Fatalf("unclear error %v", e)
			}
			if !errors.Is(e, chain.ErrCorrupt) && !errors.Is(e, chain.ErrUnknownFormat) {
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
		case chain.KindFlight:
			re = chain.EncodeFlight(obj.Star, obj.Epoch, obj.Slot, obj.Body)
		case chain.KindPoison:
			re = chain.EncodePoison(obj.Star, obj.Epoch, obj.Slot, string(obj.Body))
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
		kind := chain.KindFlight
		data := chain.EncodeFlight(star, ep, slot, body)
		if poison {
			kind = chain.KindPoison
			data = chain.EncodePoison(star, ep, slot, string(body))
			if len(body) > 256 {
				body = body[:256]
			}
		}
		obj, err := chain.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if obj.Kind != kind || obj.Star != star || obj.Epoch != ep || obj.Slot != slot || !bytes.Equal(obj.Body, body) {
			t.Fatalf("round trip changed the object: %+v", obj)
		}
		h, err := chain.DecodeHeader(data[:min(len(data), chain.HeaderProbeLen)])
		if err != nil || h != obj.Header {
			t.Fatalf("header probe: %+v, %v", h, err)
		}
	})
}
