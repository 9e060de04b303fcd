package metastore_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

func TestValidatePrefix(t *testing.T) {
	cases := []struct {
		prefix string
		ok     bool
	}{
		{"", true},
		{"chains/", true},
		{"chains/a", true},
		{"bad\x00prefix", false},
		{strings.Repeat("p", 1025), false},
	}
	for _, tc := range cases {
		err := metastore.ValidatePrefix(tc.prefix)
		if tc.ok {
			require.NoError(t, err, "%q", tc.prefix)
		} else {
			require.ErrorIs(t, err, metastore.ErrInvalidKey, "%q", tc.prefix)
		}
	}
}

func TestValidateTxn(t *testing.T) {
	cases := []struct {
		name string
		txn  metastore.Txn
		want string // "" means valid; otherwise a part of the message
	}{
		{"empty", metastore.Txn{}, ""},
		{"put under compare", metastore.Txn{
			If:   []metastore.Compare{{Key: "a", Revision: 0}, {Key: "b", Revision: 7}},
			Then: []metastore.Op{{Key: "a", Value: []byte("x")}, {Key: "c", Delete: true}},
		}, ""},
		{"compare and op on one key", metastore.Txn{
			If:   []metastore.Compare{{Key: "a", Revision: 3}},
			Then: []metastore.Op{{Key: "a", Delete: true}},
		}, ""},
		{"two compares on one key", metastore.Txn{
			If: []metastore.Compare{{Key: "a", Revision: 3}, {Key: "a", Revision: 3}},
		}, ""},
		{"empty compare key", metastore.Txn{If: []metastore.Compare{{Key: ""}}}, "empty"},
		{"negative revision", metastore.Txn{If: []metastore.Compare{{Key: "a", Revision: -1}}}, `negative revision -1 for "a"`},
		{"control character in an op", metastore.Txn{Then: []metastore.Op{{Key: "a\nb"}}}, "control character"},
		{"two ops on one key", metastore.Txn{Then: []metastore.Op{{Key: "a", Value: []byte("x")}, {Key: "a", Delete: true}}},
			`two ops on "a"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := metastore.ValidateTxn(tc.txn)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, metastore.ErrInvalidKey)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
