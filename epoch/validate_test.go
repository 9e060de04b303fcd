package epoch_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
)

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"a", "star-1", "Star_2.b", "0", "a..b", strings.Repeat("x", epoch.MaxNameLen)} {
		assert.NoError(t, epoch.ValidateName("star", ok), "%q", ok)
	}
	for _, tc := range []struct {
		name, reason string
	}{
		{"", "empty"},
		{"..", "starts with"},
		{".", "starts with"},
		{".hidden", "starts with"},
		{"-x", "starts with"},
		{"a/b", "0x2f"},
		{"a\x00", "0x0"},
		{"a\nb", "0xa"},
		{"a b", "0x20"},
		{"a\\b", "0x5c"},
		{"é", "0xc3"},
		{"a:b", "0x3a"},
		{strings.Repeat("x", epoch.MaxNameLen+1), "longer than"},
	} {
		err := epoch.ValidateName("star", tc.name)
		require.Error(t, err, "%q", tc.name)
		assert.ErrorIs(t, err, cutline.ErrInvalid)
		var ce *cutline.ConfigError
		require.True(t, errors.As(err, &ce))
		assert.Equal(t, "star", ce.Field)
		assert.Contains(t, ce.Reason, tc.reason, "%q", tc.name)
		assert.Contains(t, err.Error(), "star")
	}
}

func TestConfigErrorMessageIsBounded(t *testing.T) {
	err := epoch.ValidateName("star", strings.Repeat("y", 10_000))
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 200, "a huge name is not echoed whole")
}

func TestConstantsValidate(t *testing.T) {
	assert.NoError(t, standard().Validate())
	assert.NoError(t, express().Validate())
	assert.NoError(t, epoch.Constants{Class: "c", Buckets: []string{"a", "b", "c"}, W: 3, Window: 1}.Validate())
}

func TestMintRefusesInvalidInput(t *testing.T) {
	with := func(f func(c *epoch.Constants)) epoch.Constants {
		c := standard()
		c.Buckets = append([]string(nil), c.Buckets...)
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name  string
		star  string
		c     epoch.Constants
		field string
	}{
		{"W > K", "s1", with(func(c *epoch.Constants) { c.W = 4 }), "w"},
		{"W = 0", "s1", with(func(c *epoch.Constants) { c.W = 0 }), "w"},
		{"W < 0", "s1", with(func(c *epoch.Constants) { c.W = -1 }), "w"},
		{"K = 0", "s1", with(func(c *epoch.Constants) { c.Buckets = nil; c.W = 0 }), "buckets"},
		{"K = 0 empty slice", "s1", with(func(c *epoch.Constants) { c.Buckets = []string{} }), "buckets"},
		{"window 0", "s1", with(func(c *epoch.Constants) { c.Window = 0 }), "window"},
		{"window < 0", "s1", with(func(c *epoch.Constants) { c.Window = -3 }), "window"},
		{"duplicate buckets", "s1", with(func(c *epoch.Constants) { c.Buckets[2] = "zone-a" }), "buckets[2]"},
		{"empty bucket", "s1", with(func(c *epoch.Constants) { c.Buckets[1] = "" }), "buckets[1]"},
		{"bucket with slash", "s1", with(func(c *epoch.Constants) { c.Buckets[0] = "a/b" }), "buckets[0]"},
		{"bucket dotdot", "s1", with(func(c *epoch.Constants) { c.Buckets[0] = ".." }), "buckets[0]"},
		{"empty class", "s1", with(func(c *epoch.Constants) { c.Class = "" }), "class"},
		{"class with slash", "s1", with(func(c *epoch.Constants) { c.Class = "std/x" }), "class"},
		{"class too long", "s1", with(func(c *epoch.Constants) { c.Class = strings.Repeat("c", 65) }), "class"},
		{"empty star", "", standard(), "star"},
		{"star dotdot", "..", standard(), "star"},
		{"star with slash", "a/b", standard(), "star"},
		{"star with NUL", "a\x00", standard(), "star"},
		{"star too long", strings.Repeat("s", 65), standard(), "star"},
		{"star leading dot", ".s", standard(), "star"},
		{"star leading dash", "-s", standard(), "star"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r, err := e.m.Mint(context.Background(), tc.star, tc.c)
			require.ErrorIs(t, err, cutline.ErrInvalid)
			var ce *cutline.ConfigError
			require.True(t, errors.As(err, &ce), "%T %v", err, err)
			assert.Equal(t, tc.field, ce.Field)
			assert.Nil(t, r)
			assert.Empty(t, e.keys(t), "nothing written")
			txns, _ := e.store.counts()
			assert.Zero(t, txns)
		})
	}
}

func TestReadsRefuseBadStar(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for _, star := range []string{"", "..", "a/b", "a\x00"} {
		check := func(err error) {
			t.Helper()
			assert.ErrorIs(t, err, cutline.ErrInvalid, "%q", star)
			var ce *cutline.ConfigError
			if assert.True(t, errors.As(err, &ce)) {
				assert.Equal(t, "star", ce.Field)
			}
		}
		_, err := e.m.Get(ctx, star, 1)
		check(err)
		_, err = e.m.Chain(ctx, star)
		check(err)
		_, err = e.m.Superseded(ctx, &epoch.Record{Star: star, Epoch: 1, Constants: standard()})
		check(err)
		_, err = e.m.Publish(ctx, star, 1, 0)
		check(err)
		_, err = e.m.MarkSettled(ctx, star, 1)
		check(err)
		_, err = e.m.Advance(ctx, star, 1, epoch.Cursors{})
		check(err)
		n := 0
		for r, err := range e.m.Epochs(ctx, star) {
			n++
			assert.Nil(t, r)
			check(err)
		}
		assert.Equal(t, 1, n)
	}
	assert.Empty(t, e.keys(t))
	gets, lists := e.store.gets, e.store.lists
	assert.Zero(t, gets, "a bad star never reaches the store")
	assert.Zero(t, lists)
}
