package spill_test

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
)

// noStore is an object store that must never be called: any call fails the test.
type noStore struct{ t *testing.T }

var _ spill.ObjectStore = noStore{}

func (s noStore) called(op string) error {
	s.t.Errorf("the object store was called (%s)", op)
	return syscall.EIO
}
func (noStore) Location() string                            { return "none://" }
func (s noStore) Put(context.Context, string, []byte) error { return s.called("put") }
func (s noStore) StartUpload(context.Context, string) (spill.Upload, error) {
	return nil, s.called("start upload")
}
func (s noStore) ReadAt(context.Context, string, []byte, int64) (int, error) {
	return 0, s.called("get")
}
func (s noStore) Delete(context.Context, string) error { return s.called("delete") }
func (s noStore) ListUploads(context.Context, string) ([]spill.PendingUpload, error) {
	return nil, s.called("list uploads")
}
func (s noStore) AbortUpload(context.Context, string, string) error { return s.called("abort upload") }
func (s noStore) List(context.Context, string) ([]spill.ObjectInfo, error) {
	return nil, s.called("list")
}

// A plan with a remote tier that never spills makes no filesystem call and no call to the store.
func TestRemoteUnusedTouchesNothing(t *testing.T) {
	dirs := tempRoots(t, 2)
	before := tree(t, dirs...)
	var ops []string
	var mu sync.Mutex
	roots, err := spill.NewRoots(dirs)
	require.NoError(t, err)
	rt, err := spill.NewRemote(spill.RemoteConfig{Store: noStore{t}, Limit: 1 << 30, Application: "test"})
	require.NoError(t, err)
	m, err := spill.New(spill.Config{Roots: roots, Limit: 100, FS: recordingFS(&ops, &mu), Remote: rt})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	assert.Empty(t, ops)
	assert.Equal(t, before, tree(t, dirs...))
}

// A local root that can take the file takes it, remote tier or not; and a raw file (CreateFile,
// whose path the caller opens) never goes to the store, even when no root takes it.
func TestRemoteIsOnlyForFramedFilesNoRootTakes(t *testing.T) {
	roots, err := spill.NewRoots(tempRoots(t, 1))
	require.NoError(t, err)
	rt, err := spill.NewRemote(spill.RemoteConfig{Store: noStore{t}, Limit: 1 << 30, Application: "test"})
	require.NoError(t, err)
	m, err := spill.New(spill.Config{Roots: roots, Limit: 1 << 30, Remote: rt})
	require.NoError(t, err)
	defer m.Close()
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	assert.False(t, w.File().Remote())

	gone, err := spill.NewRoots([]string{"/nonexistent/spillway-remote-test"})
	require.NoError(t, err)
	m2, err := spill.New(spill.Config{Roots: gone, Limit: 1 << 30, Remote: rt})
	require.NoError(t, err)
	defer m2.Close()
	_, err = m2.CreateFile()
	var none *spill.NoUsableRootError
	require.ErrorAs(t, err, &none)
}

func TestNewRemoteRefusesABadConfig(t *testing.T) {
	_, err := spill.NewRemote(spill.RemoteConfig{Limit: 1})
	var cfg *spill.ConfigError
	require.ErrorAs(t, err, &cfg)
	_, err = spill.NewRemote(spill.RemoteConfig{Store: noStore{t}, Limit: -1, Application: "test"})
	require.ErrorAs(t, err, &cfg)
	_, err = spill.NewRemote(spill.RemoteConfig{Store: noStore{t}, Limit: 1, Application: "test", CallTimeout: -time.Second})
	require.ErrorAs(t, err, &cfg)
}

// CallTimeout's contract: 0 is RemoteCallTimeout, any other bound is kept.
func TestRemoteCallTimeoutDefaultsToRemoteCallTimeout(t *testing.T) {
	rt, err := spill.NewRemote(spill.RemoteConfig{Store: noStore{t}, Limit: 1, Application: "test"})
	require.NoError(t, err)
	require.Equal(t, spill.RemoteCallTimeout, rt.CallTimeout())
	rt, err = spill.NewRemote(spill.RemoteConfig{Store: noStore{t}, Limit: 1, Application: "test", CallTimeout: 3 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, rt.CallTimeout())
}
