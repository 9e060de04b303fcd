package linearize_test

import (
	"errors"
	"testing"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest/linearize"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

// TestRunRefusesConfig: a Config missing an input, or with constants that
// cannot mint an epoch, is refused before anything runs, naming the field.
func TestRunRefusesConfig(t *testing.T) {
	store := memstore.New(memstore.Options{})
	zones := []objstore.Bucket{memblob.New("zone-a")}
	c := epoch.Constants{Class: "standard", Buckets: chain.Names(zones...), W: 1, Window: 4, Prefix: "chains"}
	noW := c
	noW.W = 0
	for _, tc := range []struct {
		field string
		cfg   linearize.Config
	}{
		{"Store", linearize.Config{Zones: zones, Constants: c}},
		{"Zones", linearize.Config{Store: store, Constants: c}},
		{"w", linearize.Config{Store: store, Zones: zones, Constants: noW}},
	} {
		hist, _, err := linearize.Run(t.Context(), tc.cfg, linearize.Options{})
		var ce *cutline.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("Run with no %s: %v, want a *cutline.ConfigError naming %s", tc.field, err, tc.field)
		}
		if !errors.Is(err, cutline.ErrInvalid) {
			t.Errorf("Run with no %s: %v does not match cutline.ErrInvalid", tc.field, err)
		}
		if hist == nil {
			t.Errorf("Run with no %s returned no history", tc.field)
		}
	}
}
