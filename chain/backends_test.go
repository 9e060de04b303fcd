//go:build unix

package chain_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/objstore/s3"
)

// TestResumedScheduleOnBackends runs the resumed-epoch schedule on mem, on
// the filesystem and on versitygw (one bucket per zone): a flight X that
// another writer left in zone a at slot 0.
//
//   - Nothing resumes the epoch: a record read back cannot be written.
//   - With K=W=3, the writer meets X at its own slot and halts there with a
//     *ConflictError naming the slot and zone a, acknowledging nothing.
//   - With K=3, W=2, X in zone a and the writer's Y in zones b and c: the
//     reader serves Y or reports the conflict, never X; with Y in one zone
//     only, it reports the conflict; the fence publishes no cut.
func TestResumedScheduleOnBackends(t *testing.T) {
	for _, b := range []struct {
		name  string
		zones func(t *testing.T) []objstore.Bucket
	}{
		{"mem", func(*testing.T) []objstore.Bucket {
			return []objstore.Bucket{memblob.New("zone-a"), memblob.New("zone-b"), memblob.New("zone-c")}
		}},
		{"fs", fsBackend},
		{"versitygw", versityBackend},
	} {
		t.Run(b.name, func(t *testing.T) { resumedSchedule(t, b.zones(t)) })
	}
}

// fsBackend is three filesystem zones in a temporary directory.
func fsBackend(t *testing.T) []objstore.Bucket {
	dir := t.TempDir()
	var out []objstore.Bucket
	for i := range 3 {
		name := fmt.Sprintf("zone-%c", 'a'+i)
		b, err := fs.New(filepath.Join(dir, name), fs.Options{Name: name, NoSync: true, CreateRoot: true})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, b.Close()) })
		out = append(out, b)
	}
	return out
}

// versityBackend is three buckets of one versitygw process. Without the
// binary the test is skipped, or fails when CI=true.
func versityBackend(t *testing.T) []objstore.Bucket {
	srv := testservers.StartVersityGW(t, testservers.S3Options{})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := srv.NewClient(&http.Client{Transport: tr, Timeout: 10 * time.Second})
	var out []objstore.Bucket
	for i := range 3 {
		b, err := s3.New(client, srv.NewBucketName(t), s3.Options{RemoteOptions: objstore.RemoteOptions{Name: fmt.Sprintf("zone-%c", 'a'+i)}})
		require.NoError(t, err)
		out = append(out, b)
	}
	require.NoError(t, objstore.VerifyDistinct(t.Context(), out...))
	return out
}

func resumedSchedule(t *testing.T, buckets []objstore.Bucket) {
	ctx := t.Context()
	env := cutlinetest.New(t, memstore.New(memstore.Options{}), buckets, cutlinetest.Options{})
	p := env.Party("test")
	opts := chain.WriterOptions{Backoff: clock.Backoff{Min: time.Millisecond, Max: 10 * time.Millisecond}}

	rec := p.Mint(star, env.Constants(3, 4))
	env.Put(0, rec, 0, cutlinetest.Conflicting) // X
	back, err := p.Minter.Get(ctx, star, rec.Epoch)
	require.NoError(t, err)
	_, err = chain.NewWriter(back, p.Zones, opts)
	require.ErrorIs(t, err, epoch.ErrNotMinted, "a record read back cannot be written")
	w := p.Writer(rec, opts)
	_, err = w.Append(ctx, payload(0))
	require.ErrorIs(t, err, chain.ErrConflictingFlight)
	var ce *chain.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(0), ce.Slot)
	require.ErrorContains(t, err, "zone-a")
	waitHalted(t, w)
	require.ErrorIs(t, w.Err(), chain.ErrConflictingFlight)
	require.Zero(t, w.Released(), "nothing acknowledged")
	require.NoError(t, w.Close(ctx))

	rec2 := p.Mint(star, env.Constants(2, 4))
	env.Layout(rec2, "Y F F") // X in zone a, Y in zones b and c
	at := chain.Position{Epoch: rec2.Epoch, Slot: 0}
	for range 10 {
		got, err := p.Reader.Read(ctx, star, at)
		if err != nil {
			require.ErrorIs(t, err, chain.ErrConflictingFlight)
			continue
		}
		require.Equal(t, string(cutlinetest.PutPayload(0)), string(got), "only Y has W identical copies")
	}
	_, err = p.Fencer.Fence(ctx, star, rec2.Epoch)
	require.ErrorIs(t, err, chain.ErrConflictingFlight, "two different flights are a conflict, never committed")
	require.Equal(t, epoch.StateOpen, env.Record(star, rec2.Epoch).State, "no cut published")
	env.Delete(2, rec2, 0)
	_, err = p.Reader.Read(ctx, star, at)
	require.ErrorIs(t, err, chain.ErrConflictingFlight, "X and Y, one copy each")
}
