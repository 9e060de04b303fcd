package testlog_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/testlog"
)

// Concurrent writers lose nothing; the zero value keeps everything.
func TestConcurrentWrites(t *testing.T) {
	var b testlog.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, err := b.Write([]byte("line\n"))
				require.NoError(t, err)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 800, strings.Count(b.String(), "line\n"))
}

// Past its Limit, a Buffer keeps the most recent bytes.
func TestLimit(t *testing.T) {
	b := testlog.Buffer{Limit: 10}
	for _, s := range []string{"0123456789", "abcdef", "XY"} {
		_, err := b.Write([]byte(s))
		require.NoError(t, err)
	}
	require.Equal(t, "bcdefXY", b.String(), "16 bytes held: the last 5 are kept, then XY")
}
