package metastore_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

type chainRecord struct {
	metastore.RecordHeader
	Next  int64            `json:"next"`
	Heads map[string]int64 `json:"heads,omitempty"`
}

func TestRecordRoundTrip(t *testing.T) {
	in := chainRecord{RecordHeader: metastore.RecordHeader{Kind: "chain", Format: 1}, Next: 8, Heads: map[string]int64{"standard": 7}}
	data, err := metastore.EncodeRecord(in)
	require.NoError(t, err)
	assert.Contains(t, string(data), "\n  \"kind\": \"chain\"", "indented, readable with etcdctl")
	var out chainRecord
	require.NoError(t, metastore.DecodeRecord("chains/a", data, "chain", 1, &out))
	assert.Equal(t, in, out)
}

func TestRecordMinorAdditionsAreIgnored(t *testing.T) {
	data := []byte(`{"kind":"chain","format":1,"next":3,"added_later":{"x":1}}`)
	var out chainRecord
	require.NoError(t, metastore.DecodeRecord("chains/a", data, "chain", 1, &out))
	assert.Equal(t, int64(3), out.Next)
}

func TestDecodeRecordRejects(t *testing.T) {
	cases := []struct {
		name, data, reason string
		wantJSONCause      bool
	}{
		{"newer major format", `{"kind":"chain","format":2,"next":1}`, "format 2 is not supported", false},
		{"format missing", `{"kind":"chain","next":1}`, "format 0 is not supported", false},
		{"negative format", `{"kind":"chain","format":-1}`, "format -1", false},
		{"another kind", `{"kind":"epoch","format":1}`, `kind is "epoch"`, false},
		{"kind missing", `{"format":1}`, `kind is ""`, false},
		{"corrupt JSON", `{"kind":"chain","format":1,`, "not JSON", true},
		{"not an object", `[1,2,3]`, "not JSON", true},
		{"empty", ``, "empty value", false},
		{"blank", " \n\t", "empty value", false},
		{"field of the wrong type", `{"kind":"chain","format":1,"next":"eight"}`, "malformed", true},
		{"not UTF-8 in a string", "{\"kind\":\"chain\",\"format\":1,\"star\":\"a\xffb\"}", "not UTF-8", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out chainRecord
			err := metastore.DecodeRecord("chains/a", []byte(tc.data), "chain", 1, &out)
			require.ErrorIs(t, err, metastore.ErrBadRecord)
			var re *metastore.RecordError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, "chains/a", re.Key)
			assert.Equal(t, "chain", re.Kind)
			assert.Contains(t, err.Error(), tc.reason)
			assert.Contains(t, err.Error(), `"chains/a"`)
			if tc.wantJSONCause {
				assert.Error(t, re.Err)
			}
		})
	}
	var se *json.SyntaxError
	err := metastore.DecodeRecord("", []byte("{"), "chain", 1, &chainRecord{})
	assert.ErrorAs(t, err, &se, "the JSON cause stays reachable")
	assert.NotContains(t, err.Error(), " at ", "no key, no location")
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"kind":"chain","format":1,"next":3}`))
	f.Add([]byte(`{"kind":"chain","format":9}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out chainRecord
		err := metastore.DecodeRecord("k", data, "chain", 1, &out)
		if err != nil {
			require.ErrorIs(t, err, metastore.ErrBadRecord)
			return
		}
		assert.Equal(t, "chain", out.Kind)
		assert.Equal(t, 1, out.Format)
	})
}
