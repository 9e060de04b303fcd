package node

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// The S3 zones: credentials and region from the standard AWS environment
// unless the flags (or their CUTLINE_ variables) give them, and a zone
// set that names one store twice refused before anything starts.
func TestS3Flags(t *testing.T) {
	aws := map[string]string{"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "from-the-environment", "AWS_REGION": "eu-west-3"}
	getenv := func(k string) string { return aws[k] }
	s3 := []string{"-s3-endpoint", "https://s3.example.com", "-s3-buckets", "a,b,c"}

	cfg, err := parseFlags(s3, getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "AKID", cfg.S3AccessKey)
	require.Equal(t, "from-the-environment", cfg.S3SecretKey)
	require.Equal(t, "eu-west-3", cfg.S3Region)

	cfg, err = parseFlags(append(s3, "-s3-access-key", "K", "-s3-secret-key", "S", "-s3-region", "us-east-2"), getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"K", "S", "us-east-2"}, []string{cfg.S3AccessKey, cfg.S3SecretKey, cfg.S3Region}, "the flags beat the environment")

	cfg, err = parseFlags(nil, getenv, io.Discard)
	require.NoError(t, err, "filesystem zones ignore the AWS environment")
	require.Empty(t, cfg.S3AccessKey)

	_, err = parseFlags([]string{"-s3-endpoint", "https://s3.example.com", "-s3-buckets", "a,b,a"}, getenv, io.Discard)
	require.ErrorContains(t, err, `-s3-buckets a,b,a: want one distinct store per zone: bucket "a" is given for zone-a and zone-c`)
}
