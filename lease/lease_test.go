package lease_test

import (
	"testing"

	"github.com/cutline/cutline/lease/leasetest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// The scenario suite on the in-memory store.
func TestScenariosMem(t *testing.T) {
	leasetest.Run(t, leasetest.Backend{
		NewStore: func(t *testing.T) (metastore.Store, string) { return memstore.New(memstore.Options{}), "" },
		Expire: func(t *testing.T, s metastore.Store, sess metastore.Session) {
			s.(*memstore.Store).Expire(sess)
		},
	})
}

// The suite again under a root prefix.
func TestScenariosMemRoot(t *testing.T) {
	leasetest.Run(t, leasetest.Backend{
		NewStore: func(t *testing.T) (metastore.Store, string) { return memstore.New(memstore.Options{}), "tenant/" },
		Expire: func(t *testing.T, s metastore.Store, sess metastore.Session) {
			s.(*memstore.Store).Expire(sess)
		},
	})
}
