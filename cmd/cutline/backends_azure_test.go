package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/objstore/azblob"
)

// runTool runs the tool on the zones its flags name (no Env buckets).
func runTool(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return result{code: code, out: out.String(), stderr: errb.String()}
}

// TestAzureZones: three containers of an Azurite account, named by the
// Azure flags, pass verify-zones; one container under two names, and
// flags that do not go together, are refused; the key is never printed.
func TestAzureZones(t *testing.T) {
	srv := testservers.StartAzurite(t, testservers.AzureOptions{})
	client, err := azblob.NewClient(t.Context(), azblob.ClientConfig{ServiceURL: srv.Endpoint, Account: srv.Account, Key: srv.Key})
	require.NoError(t, err)
	for _, c := range []string{"ca", "cb", "cc"} {
		_, err := client.CreateContainer(t.Context(), "cutline-"+c, nil)
		require.NoError(t, err)
	}
	azure := func(containers string) []string {
		return []string{"-azure-url", srv.Endpoint, "-azure-containers", containers,
			"-azure-account", srv.Account, "-azure-key", srv.Key}
	}

	r := runTool(t, append(azure("zone-a=cutline-ca,zone-b=cutline-cb,zone-c=cutline-cc"), "verify-zones", "-yes", "-json")...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	var v VerifyView
	require.NoError(t, json.Unmarshal([]byte(r.out), &v))
	require.True(t, v.Distinct)
	require.Len(t, v.Zones, 3)
	for i, z := range v.Zones {
		require.Equal(t, fmt.Sprintf("zone-%c", 'a'+i), z.Zone)
		require.True(t, z.OK, z.Error)
	}

	r = runTool(t, append(azure("zone-a=cutline-ca,zone-b=cutline-cb,zone-c=cutline-ca"), "verify-zones", "-yes")...)
	require.NotEqual(t, 0, r.code, "stdout: %s\nstderr: %s", r.out, r.stderr)
	require.Contains(t, r.out+r.stderr, `"zone-a" and "zone-c" are not distinct stores`)

	for _, bad := range [][]string{
		{"-azure-url", srv.Endpoint, "verify-zones", "-yes"},
		{"-azure-containers", "cutline-ca", "verify-zones", "-yes"},
		{"-azure-url", srv.Endpoint + "," + srv.Endpoint, "-azure-containers", "cutline-ca,cutline-cb,cutline-cc", "verify-zones", "-yes"},
		{"-azure-url", srv.Endpoint, "-azure-containers", "Not_A_Container", "verify-zones", "-yes"},
		{"-azure-url", "ftp://127.0.0.1/x", "-azure-containers", "cutline-ca", "verify-zones", "-yes"},
		append(azure("cutline-ca")[:4], "-azure-key", "not base64!", "verify-zones", "-yes"),
	} {
		r := runTool(t, bad...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", bad, r.stderr)
	}
	r = runTool(t, append(azure("cutline-ca"), "-azure-account", "wrong-account", "verify-zones", "-yes")...)
	require.NotEqual(t, 0, r.code)
	for _, out := range []string{r.out, r.stderr} {
		require.NotContains(t, out, srv.Key, "the key is never printed")
	}
}
