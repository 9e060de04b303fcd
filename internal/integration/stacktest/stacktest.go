// Package stacktest holds what this module's tests share to run real
// servers and processes: zone names and run IDs, K versitygw zones under
// one set of credentials, and the broker command (examples/broker) built
// with the test's own go command.
package stacktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/testservers"
)

// ZoneName is the name of zone i: zone-a, zone-b, …
func ZoneName(i int) string { return fmt.Sprintf("zone-%c", 'a'+i) }

// RandomID returns 8 random hex digits, to keep runs apart in one etcd or
// one set of buckets.
func RandomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Zones is K versitygw processes, one per zone, all reached with one
// access key and secret.
type Zones struct {
	Servers           []*testservers.S3Server
	AccessKey, Secret string
}

// StartZones starts k versitygw zones whose buckets are named
// bucketPrefix plus the zone's name, under fresh credentials shared by
// all of them (a host passes one access key for every zone). They stop
// when the test ends.
func StartZones(t testing.TB, k int, bucketPrefix string) Zones {
	t.Helper()
	z := Zones{AccessKey: "it-" + RandomID(), Secret: "secret-" + RandomID() + RandomID()}
	for i := range k {
		z.Servers = append(z.Servers, testservers.StartVersityGW(t, testservers.S3Options{
			Bucket: bucketPrefix + ZoneName(i), AccessKey: z.AccessKey, SecretKey: z.Secret}))
	}
	return z
}

// Endpoints returns the zones' endpoints, comma-separated, in zone order.
func (z Zones) Endpoints() string {
	var out []string
	for _, s := range z.Servers {
		out = append(out, s.Endpoint)
	}
	return strings.Join(out, ",")
}

// Buckets returns the zones' buckets, comma-separated, in zone order.
func (z Zones) Buckets() string {
	var out []string
	for _, s := range z.Servers {
		out = append(out, s.Bucket)
	}
	return strings.Join(out, ",")
}

// BrokerDir is the directory of the examples/broker module: three levels
// up from a package of this module, then examples/broker, checked by its
// go.mod.
func BrokerDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "broker"))
	require.NoError(t, err)
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(mod), "module github.com/cutline/cutline/examples/broker\n", "%s is not the broker's module", dir)
	return dir
}

// buildTimeout bounds the build of the broker.
const buildTimeout = 5 * time.Minute

// BuildBroker builds the broker command into a temporary directory with
// the go command go test put first on the test's PATH, with the race
// detector when the test runs with it (Race).
func BuildBroker(t testing.TB) string { return build(t, ".", "broker") }

// BuildDemo builds the broker's takeover demonstration (examples/broker/demo)
// as BuildBroker builds the broker.
func BuildDemo(t testing.TB) string { return build(t, "./demo", "demo") }

// build builds the package pkg of the broker's module into a temporary
// directory as name.
func build(t testing.TB, pkg, name string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds the broker")
	ctx, cancel := context.WithTimeout(t.Context(), buildTimeout)
	defer cancel()
	bin := filepath.Join(t.TempDir(), name)
	args := []string{"build", "-o", bin}
	if Race {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = BrokerDir(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	return bin
}
