package authority_test

import (
	"testing"

	"github.com/cutline/cutline/authority/authoritytest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// The scenario suite on the in-memory store.
func TestScenariosMem(t *testing.T) {
	authoritytest.Run(t, authoritytest.Backend{
		NewStore: func(t *testing.T) metastore.Store { return memstore.New(memstore.Options{}) },
		Expire: func(t *testing.T, s metastore.Store, sess metastore.Session) {
			s.(*memstore.Store).Expire(sess)
		},
	})
}
