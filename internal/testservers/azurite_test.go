package testservers

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAzuriteStopRestart: the emulator binds 127.0.0.1, a stopped one
// refuses connections, and a restarted one listens on the same address.
// What it serves is tested with the client, in objstore/azblob.
func TestAzuriteStopRestart(t *testing.T) {
	s := StartAzurite(t, AzureOptions{})
	require.Contains(t, s.Endpoint, "http://127.0.0.1:")
	require.Equal(t, "http://"+s.addr+"/cutline", s.Endpoint)
	require.NotEmpty(t, s.Key)
	c, err := net.Dial("tcp", s.addr)
	require.NoError(t, err)
	require.NoError(t, c.Close())

	s.Stop()
	_, err = net.Dial("tcp", s.addr)
	require.Error(t, err, "a stopped server accepts nothing")
	s.Stop() // idempotent

	s.Restart()
	c, err = net.Dial("tcp", s.addr)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NotContains(t, s.Output(), s.Key, "the key never reaches the output")
}

func TestFindAzurite(t *testing.T) {
	p, err := FindAzurite()
	if err != nil {
		Unavailable(t, "%v", err)
	}
	require.NotEmpty(t, p)
}
