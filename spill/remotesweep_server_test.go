//go:build s3server

package spill_test

// The sweep of dead applications' prefixes against a real S3-compatible server (s3proxy,
// project/s3-server.sh: make test-remote).

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
)

// An application killed mid-spill (its driver gone, so its marker ages) leaves a finished object
// and a multipart upload in progress; a probe object is left by an executor killed while probing.
// The next application's sweep removes them all, once older than the age by the store's clock,
// and leaves alone a live application (whose driver rewrote its marker), a dead one younger
// than the age, and an object that is not ours. At its end an application removes its prefix.
func TestRemoteSweepTakesDeadApplicationsOnly(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	const age = 2 * time.Second

	// The killed application: a driver marker, an executor's finished file, an upload in
	// progress of another file, as a kill -9 leaves them.
	_, err := spill.MarkApplication(ctx, s, "app-dead")
	require.NoError(t, err)
	dead := newRemote(t, s, 1<<30, "app-dead")
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), dead, nil)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	writeFramed(t, w, spillData(100<<10, 1))
	inFlight := dead.Prefix() + "spillway-plan/spill-in-flight"
	up, err := s.StartUpload(ctx, inFlight)
	require.NoError(t, err)
	require.NoError(t, up.WritePart(ctx, 1, spillData(spill.RemotePartSize, 2)))
	require.NoError(t, s.Put(ctx, "spillway-probe-left-by-a-kill", []byte("probe")))
	require.NoError(t, s.Put(ctx, "not-ours/data", []byte("a user's object")))

	_, err = spill.MarkApplication(ctx, s, "app-live")
	require.NoError(t, err)
	time.Sleep(age + 1500*time.Millisecond)            // object times have a second's resolution
	_, err = spill.MarkApplication(ctx, s, "app-live") // its driver marks it more often than age
	require.NoError(t, err)
	_, err = spill.MarkApplication(ctx, s, "app-young") // dead, but not for long enough
	require.NoError(t, err)

	res, err := spill.SweepApplications(ctx, s, "app-sweeper", age)
	require.NoError(t, err)
	want := spill.SweepResult{Prefixes: 2, Objects: 3, Uploads: 1}
	if res.UploadsNotListed {
		// s3proxy cannot list uploads in progress (501): on such a store the bucket's lifecycle
		// rule aborts them; here the test does, as the rule would.
		want = spill.SweepResult{Prefixes: 2, Objects: 3, UploadsNotListed: true}
		require.NoError(t, up.Abort(ctx))
	}
	assert.Equal(t, want, res, "the dead application's marker, file and upload, and the probe object")
	left := []string{
		"not-ours/data",
		"spillway-app-app-live/alive",
		"spillway-app-app-sweeper/alive",
		"spillway-app-app-young/alive",
	}
	assert.ElementsMatch(t, left, objects(t, s))
	assert.ElementsMatch(t, left, backendFiles(t, s), "no part of the dead application's upload is left")

	// Each application's end removes its own prefix, and nothing else.
	for _, app := range []string{"app-sweeper", "app-live", "app-young"} {
		res, err = spill.RemoveApplication(ctx, s, app)
		require.NoError(t, err)
		assert.Equal(t, 1, res.Objects, app)
	}
	assert.Equal(t, []string{"not-ours/data"}, objects(t, s), "what is not ours is never touched")
	require.NoError(t, s.Delete(ctx, "not-ours/data"))
	assert.Empty(t, backendFiles(t, s), "no part of an upload is left in the backend")
}

// The application's end removes its prefix whole: files of its executors still live (an executor
// that did not stop), an upload in progress, the marker.
func TestRemoteApplicationEndRemovesItsPrefix(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	_, err := spill.MarkApplication(ctx, s, "app-ending")
	require.NoError(t, err)
	rt := newRemote(t, s, 1<<30, "app-ending")
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), rt, nil)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	writeFramed(t, w, spillData(64<<10, 3))
	inFlight, err := m.CreateFramedFile()
	require.NoError(t, err)
	_, err = inFlight.Write(spillData(spill.RemotePartSize+1, 4)) // one part sent
	require.NoError(t, err)

	res, err := spill.RemoveApplication(ctx, s, "app-ending")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Objects, "the marker and the finished file")
	if !res.UploadsNotListed { // s3proxy cannot list uploads: then the executor's close aborts it
		assert.Equal(t, 1, res.Uploads)
	}
	assert.Empty(t, objects(t, s))
	// The executor's own cleanup afterwards finds its objects gone: no error.
	require.NoError(t, m.Close())
	assert.Empty(t, backendFiles(t, s))
}

func TestRemoteApplicationNames(t *testing.T) {
	assert.Equal(t, "app-20261207-0001", spill.ApplicationName("app-20261207-0001"))
	assert.Equal(t, "spark_a_b", spill.ApplicationName("spark/a b"))
	assert.Equal(t, "unnamed", spill.ApplicationName(""))
	assert.Equal(t, "unnamed", spill.ApplicationName(".."))
	_, err := spill.NewRemote(spill.RemoteConfig{Store: testStore(t), Limit: 1, Application: "a/b"})
	var cfg *spill.ConfigError
	require.ErrorAs(t, err, &cfg)
	_, err = spill.SweepApplications(context.Background(), testStore(t), "a", 0)
	require.ErrorAs(t, err, &cfg)
}
