package etcdlocal

import (
	"bytes"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
)

// etcd's notices that ask nothing of the operator are dropped wherever
// they stand in the message (raft puts the member's id first); every
// other warning reaches the host's logger.
func TestQuietNotices(t *testing.T) {
	var buf bytes.Buffer
	core := &slogCore{log: slog.New(slog.NewTextHandler(&buf, nil)), closing: new(atomic.Bool)}
	for _, msg := range []string{
		"8e9e05c52164694d cannot campaign at term 2 since there are still pending configuration changes to apply",
		"Running http and grpc server on single port. This is not recommended for production.",
		"simple token is not cryptographically signed",
	} {
		require.NoError(t, core.Write(zapcore.Entry{Level: zapcore.WarnLevel, Message: msg}, nil))
		require.Empty(t, buf.String(), "%q was logged", msg)
	}
	require.NoError(t, core.Write(zapcore.Entry{Level: zapcore.WarnLevel, Message: "slow fdatasync"}, nil))
	require.Contains(t, buf.String(), "level=WARN msg=\"etcd: slow fdatasync\"")
}
