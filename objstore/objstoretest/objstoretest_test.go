package objstoretest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
	"github.com/cutline/cutline/objstore/objstoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunOnMem(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return memblob.New("zone-a") })
}

// broken is a memblob bucket with one contract violation switched on.
type broken struct {
	*memblob.Bucket
	flaw string
	kept map[string][]byte // for "retains-slice"
}

func (b *broken) Create(ctx context.Context, key string, data []byte) error {
	switch b.flaw {
	case "overwrites":
		_ = b.Bucket.Delete(ctx, key)
	case "ignores-ctx":
		ctx = context.Background()
	case "retains-slice":
		if err := b.Bucket.Create(ctx, key, data); err != nil {
			return err
		}
		b.kept[key] = data
		return nil
	}
	return b.Bucket.Create(ctx, key, data)
}

func (b *broken) Get(ctx context.Context, key string) ([]byte, error) {
	if d, ok := b.kept[key]; ok {
		return d, nil
	}
	d, err := b.Bucket.Get(ctx, key)
	if b.flaw == "missing-is-unavailable" && errors.Is(err, objstore.ErrNotFound) {
		return nil, objstore.Unavailable(errors.New("HTTP 404"))
	}
	return d, err
}

func (b *broken) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	d, err := b.Bucket.GetRange(ctx, key, offset, length)
	if b.flaw == "range-past-end-not-found" && err == nil && len(d) == 0 {
		return nil, objstore.ErrNotFound
	}
	return d, err
}

func (b *broken) List(ctx context.Context, prefix, after string, limit int) ([]objstore.ObjectInfo, error) {
	page, err := b.Bucket.List(ctx, prefix, after, limit)
	if b.flaw == "list-unsorted" {
		slices.Reverse(page)
	}
	return page, err
}

// TestSuiteFailsBrokenBackends checks that the suite can fail: each broken
// bucket runs the suite in a child process, which must report the named
// subtests as failed.
func TestSuiteFailsBrokenBackends(t *testing.T) {
	const env = "OBJSTORETEST_FLAW"
	if flaw := os.Getenv(env); flaw != "" {
		objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
			return &broken{Bucket: memblob.New("broken"), flaw: flaw, kept: map[string][]byte{}}
		})
		return
	}
	for _, tc := range []struct {
		flaw     string
		failures []string
	}{
		{"overwrites", []string{"CreateOnly", "ConcurrentCreators", "Exists"}},
		{"missing-is-unavailable", []string{"NotFound"}},
		{"range-past-end-not-found", []string{"GetRange"}},
		{"list-unsorted", []string{"List"}},
		{"ignores-ctx", []string{"CanceledContext"}},
		{"retains-slice", []string{"DataOwnership"}},
	} {
		t.Run(tc.flaw, func(t *testing.T) {
			run := "^TestSuiteFailsBrokenBackends$/^(" + strings.Join(tc.failures, "|") + ")$"
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run="+run, "-test.count=1")
			cmd.Env = append(os.Environ(), env+"="+tc.flaw)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the suite passed a bucket that %s:\n%s", tc.flaw, out)
			for _, name := range tc.failures {
				require.Contains(t, string(out), "--- FAIL: TestSuiteFailsBrokenBackends/"+name+" ",
					"subtest %s should fail for a bucket that %s", name, tc.flaw)
			}
		})
	}
}
