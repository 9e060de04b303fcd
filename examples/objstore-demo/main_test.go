package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), &out))
	s := out.String()
	for _, want := range []string{
		"zone-a: verified: the bucket enforces create-only writes",
		"zone-c: second create (poison): refused, already exists",
		"zone-a: 8 racing creators, exactly one winner",
		`zone-b: read back "flight: epoch 1, slot 0"`,
		"zone-a: list: demo/race (",
		"zone-a: list: demo/star-1/00000000000000000001/00000000000000000000 (23 bytes)",
		"ok: create-only holds in every zone",
	} {
		require.Contains(t, s, want)
	}
}
