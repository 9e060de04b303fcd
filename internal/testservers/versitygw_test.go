package testservers

import (
	"bytes"
	"io"
	"testing"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
)

func TestVersityGWStopRestartKeepsData(t *testing.T) {
	s := StartVersityGW(t, S3Options{})
	require.Contains(t, s.Endpoint, "http://127.0.0.1:")
	ctx := t.Context()
	key := "zone/k"
	_, err := s.Client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &s.Bucket, Key: &key, Body: bytes.NewReader([]byte("v1"))})
	require.NoError(t, err)

	s.Stop()
	_, err = s.Client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.Bucket, Key: &key})
	require.Error(t, err, "a stopped server answers nothing")
	s.Stop() // idempotent

	s.Restart()
	out, err := s.Client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.Bucket, Key: &key})
	require.NoError(t, err)
	data, err := io.ReadAll(out.Body)
	require.NoError(t, out.Body.Close())
	require.NoError(t, err)
	require.Equal(t, "v1", string(data), "the restarted zone serves the same directory")
}

func TestVersityGWFreshBuckets(t *testing.T) {
	s := StartVersityGW(t, S3Options{Bucket: "first"})
	a, b := s.NewBucketName(t), s.NewBucketName(t)
	require.NotEqual(t, a, b)
	out, err := s.Client.ListBuckets(t.Context(), &awss3.ListBucketsInput{})
	require.NoError(t, err)
	var names []string
	for _, bk := range out.Buckets {
		names = append(names, *bk.Name)
	}
	require.ElementsMatch(t, []string{"first", a, b}, names)
}

func TestFindVersityGW(t *testing.T) {
	p, err := FindVersityGW()
	if err != nil {
		Unavailable(t, "%v", err)
	}
	require.NotEmpty(t, p)
}
