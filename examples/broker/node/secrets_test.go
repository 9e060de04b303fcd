package node

import (
	"bytes"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

// Neither the broker's help nor an error of its flags shows a credential
// given by a flag or by its CUTLINE_ variable.
func TestHelpShowsNoSecret(t *testing.T) {
	secrets := map[string]string{"-s3-secret-key": "s3-secret-for-tests", "-s3-access-key": "AKIA-FOR-TESTS", "-etcd-password": "etcd-password-for-tests"}
	env := map[string]string{"CUTLINE_S3_SECRET_KEY": "s3-secret-for-tests", "CUTLINE_ETCD_PASSWORD": "etcd-password-for-tests"}
	getenv := func(k string) string { return env[k] }
	var args []string
	for f, s := range secrets {
		args = append(args, f, s)
	}
	check := func(how, printed string) {
		t.Helper()
		for f, s := range secrets {
			require.NotContains(t, printed, s, "%s shows %s", how, f)
		}
	}
	var out bytes.Buffer
	_, err := parseFlags(append(append([]string{}, args...), "-h"), getenv, &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, out.String(), "-etcd-password")
	check("broker -h", out.String())

	out.Reset()
	_, err = parseFlags(append(append([]string{}, args...), "-w", "9"), getenv, &out)
	require.Error(t, err)
	check("a flag's error", out.String()+err.Error())

}
