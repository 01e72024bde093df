//go:build s3server

package s3store_test

// Probe against a real S3-compatible server (project/s3-server.sh: make test-remote).

import (
	"context"
	crand "crypto/rand"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill/s3store"
)

var names = s3store.Settings{
	URI: "test.uri", Endpoint: "test.endpoint", Region: "test.region",
	AccessKey: "test.access.key", SecretKey: "test.secret.key", PathStyle: "test.path.style",
}

func serverConfig(t *testing.T) s3store.Config {
	t.Helper()
	endpoint := os.Getenv("SPILLWAY_S3_ENDPOINT")
	if endpoint == "" {
		t.Fatal("SPILLWAY_S3_ENDPOINT is not set: run these tests through project/s3-server.sh (make test-remote)")
	}
	return s3store.Config{
		URI:      "s3a://" + os.Getenv("SPILLWAY_S3_BUCKET") + "/probe-" + strings.ToLower(crand.Text()),
		Endpoint: endpoint, AccessKey: os.Getenv("SPILLWAY_S3_ACCESS_KEY"), SecretKey: os.Getenv("SPILLWAY_S3_SECRET_KEY"),
		Region: "us-east-1", PathStyle: true, Settings: names,
	}
}

func probe(t *testing.T, cfg s3store.Config) (*s3store.Store, error) {
	t.Helper()
	s, err := s3store.New(cfg)
	require.NoError(t, err)
	return s, s.Probe(context.Background())
}

func TestProbeWritesAndRemovesOneObject(t *testing.T) {
	s, err := probe(t, serverConfig(t))
	require.NoError(t, err)
	keys, err := s.List(context.Background(), "")
	require.NoError(t, err)
	assert.Empty(t, keys, "the probe object was removed")
}

func requireProbeError(t *testing.T, err error, secret string, want ...string) {
	t.Helper()
	var pe *s3store.ProbeError
	require.True(t, errors.As(err, &pe), "a *ProbeError: %v", err)
	for _, w := range want {
		assert.Contains(t, err.Error(), w)
	}
	assert.NotContains(t, err.Error(), secret, "no secret in the message")
}

func TestProbeNamesTheCredentialsWhenTheyAreRefused(t *testing.T) {
	cfg := serverConfig(t)
	cfg.SecretKey = "not-the-secret-" + crand.Text()
	_, err := probe(t, cfg)
	requireProbeError(t, err, cfg.SecretKey, "refused the credentials", "test.access.key", "test.secret.key")
	_, err = probe(t, serverConfig(t)) // the store still works with the right ones
	require.NoError(t, err)
}

func TestProbeNamesTheURIWhenTheBucketIsMissing(t *testing.T) {
	cfg := serverConfig(t)
	cfg.URI = "s3a://no-such-bucket-" + strings.ToLower(crand.Text()) + "/spill"
	_, err := probe(t, cfg)
	requireProbeError(t, err, cfg.SecretKey, "does not exist", "test.uri")
}

func TestProbeNamesTheEndpointWhenNothingAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // a port nothing listens on
	cfg := serverConfig(t)
	cfg.Endpoint = "http://" + addr
	_, err = probe(t, cfg)
	requireProbeError(t, err, cfg.SecretKey, "cannot reach the endpoint "+addr, "test.endpoint")
}
