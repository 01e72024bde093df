//go:build s3server

package spill_test

// The remote tier against a real S3-compatible server (s3proxy on loopback, started by
// project/s3-server.sh: make test-remote). Never a mock of the client.

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/spillway/spillway/spill/errorfs"
	"github.com/spillway/spillway/spill/faultenv"
	"github.com/spillway/spillway/spill/s3store"
)

// testStore is a store under a prefix of its own in the server's bucket; whatever a test leaves
// there is removed when it ends.
func testStore(t testing.TB) *s3store.Store {
	t.Helper()
	endpoint := os.Getenv("SPILLWAY_S3_ENDPOINT")
	if endpoint == "" {
		t.Fatal("SPILLWAY_S3_ENDPOINT is not set: run these tests through project/s3-server.sh (make test-remote)")
	}
	s, err := s3store.New(s3store.Config{
		URI:      "s3a://" + os.Getenv("SPILLWAY_S3_BUCKET") + "/test-" + strings.ToLower(crand.Text()),
		Endpoint: endpoint, AccessKey: os.Getenv("SPILLWAY_S3_ACCESS_KEY"), SecretKey: os.Getenv("SPILLWAY_S3_SECRET_KEY"),
		Region: "us-east-1", PathStyle: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		keys, err := s.List(context.Background(), "")
		if err != nil {
			t.Errorf("listing what the test left: %v", err)
		}
		for _, k := range keys {
			_ = s.Delete(context.Background(), k.Key)
		}
		ups, err := s.ListUploads(context.Background(), "")
		if err != nil && !errors.Is(err, spill.ErrUploadsNotListed) {
			t.Errorf("listing the uploads the test left: %v", err)
		}
		for _, u := range ups {
			_ = s.AbortUpload(context.Background(), u.Key, u.ID)
		}
	})
	return s
}

func objects(t *testing.T, s *s3store.Store) []string {
	t.Helper()
	objs, err := s.List(context.Background(), "")
	require.NoError(t, err)
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

// backendFiles lists every file the server's filesystem backend holds under the store's prefix,
// the parts of uploads in progress included (S3 lists none of those), as keys under the prefix.
func backendFiles(t *testing.T, s *s3store.Store) []string {
	t.Helper()
	data := os.Getenv("SPILLWAY_S3_DATA")
	require.NotEmpty(t, data, "SPILLWAY_S3_DATA is not set: run through project/s3-server.sh")
	prefix := strings.TrimPrefix(s.Location(), "s3a://"+os.Getenv("SPILLWAY_S3_BUCKET")+"/")
	var files []string
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(data, path)
		if err != nil {
			return err
		}
		switch _, part, inUpload := strings.Cut(rel, "-"+prefix+"/"); {
		case strings.HasPrefix(rel, prefix+"/"):
			files = append(files, strings.TrimPrefix(rel, prefix+"/"))
		case inUpload && strings.HasPrefix(rel, ".mpus-"): // s3proxy keeps an upload's parts so
			files = append(files, "part of an upload: "+part)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// newRemote is a Remote of the application app (test-app when not given).
func newRemote(t testing.TB, s spill.ObjectStore, limit int64, app ...string) *spill.Remote {
	t.Helper()
	application := "test-app"
	if len(app) > 0 {
		application = app[0]
	}
	rt, err := spill.NewRemote(spill.RemoteConfig{Store: s, Limit: limit, LimitSetting: "test.remote.maxSize", Application: application})
	require.NoError(t, err)
	return rt
}

func remoteManager(t testing.TB, dirs []string, fsys spill.FS, rt *spill.Remote, format *spill.Format) (*spill.Manager, *spill.Shared) {
	t.Helper()
	roots, err := spill.NewRoots(dirs)
	require.NoError(t, err)
	shared := new(spill.Shared)
	m, err := spill.New(spill.Config{Roots: roots, Limit: 1 << 30, LimitSetting: "test.limit", FS: fsys,
		Shared: shared, SharedLimit: 1 << 30, SharedLimitSetting: "test.executorLimit", Format: format, Remote: rt})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m, shared
}

// givenUp is a filesystem on which every root fails to open: no local root takes any file.
func givenUp() spill.FS {
	return errorfs.Wrap(spill.OSFS{}, errorfs.Errno(syscall.EACCES, errorfs.OnOp(errorfs.OpOpenRoot)))
}

// spillData is n bytes of text that compresses somewhat and holds a marker a reader of the bucket
// must never see.
func spillData(n int, seed uint64) []byte {
	rng := mrand.New(mrand.NewPCG(seed, 54))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString("plaintext-marker ")
		for range 48 {
			b.WriteByte(byte('a' + rng.IntN(26)))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()[:n]
}

func writeFramed(t *testing.T, w *spill.Writer, data []byte) {
	t.Helper()
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1<<20+7) // writes that straddle chunks and parts
		_, err := w.Write(rest[:n])
		require.NoError(t, err)
		rest = rest[n:]
	}
	require.NoError(t, w.Close())
}

func readAll(t *testing.T, f *spill.File, opts spill.ReaderOptions) []byte {
	t.Helper()
	r, err := f.OpenReader(opts)
	require.NoError(t, err)
	defer r.Close()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	return got
}

// The only local dir is a real full tmpfs: the file goes to the store, whole, in several parts; it reads back identical in order and
// from any offset, it is counted in every budget, the bucket holds it sealed, and release removes
// its object.
func TestRemoteTakesTheFileTheFullLocalDirCannot(t *testing.T) {
	root := faultenv.Tmpfs(t, "size=1m")
	faultenv.Fill(t, filepath.Join(root, "ballast"))
	s := testStore(t)
	rt := newRemote(t, s, 1<<30)
	lz4, err := chunkfile.ParseCodec("lz4")
	require.NoError(t, err)
	m, shared := remoteManager(t, []string{root}, nil, rt, &spill.Format{Codec: lz4})

	data := spillData(2*spill.RemotePartSize+3<<20, 2) // two full parts and a short last one
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	f := w.File()
	require.True(t, f.Remote(), "no local dir has room: the file goes to the store")
	assert.Empty(t, planDirs(t, root), "nothing was made on the full local dir")
	assert.True(t, strings.HasPrefix(f.Path(), s.Location()+"/"+rt.Prefix()), f.Path())
	writeFramed(t, w, data)

	stored := w.StoredSize()
	assert.Less(t, stored, int64(len(data)), "remote files are compressed as local ones")
	assert.Equal(t, stored, m.Used(), "the plan counts the remote bytes")
	assert.Equal(t, stored, shared.Used(), "the executor counts them")
	assert.Equal(t, stored, rt.Used(), "the remote cap counts them")
	assert.Equal(t, int64(1), shared.Stats.RemoteFilesCreated.Load())

	assert.Equal(t, data, readAll(t, f, spill.ReaderOptions{}), "read in order, with read-ahead")
	assert.Equal(t, data, readAll(t, f, spill.ReaderOptions{Synchronous: true}), "read in order, without")
	assert.Equal(t, stored, shared.Stats.RemoteBytesWritten.Load())
	assert.Equal(t, 2*stored, shared.Stats.RemoteBytesRead.Load(), "each read in order gets every stored byte once")
	r, err := f.OpenReader(spill.ReaderOptions{})
	require.NoError(t, err)
	for _, off := range []int64{int64(len(data)) - 1, 0, spill.RemotePartSize - 5, 12345, int64(len(data)) - 300000} {
		_, err := r.Seek(off, io.SeekStart)
		require.NoError(t, err)
		got := make([]byte, min(70000, int64(len(data))-off))
		_, err = io.ReadFull(r, got)
		require.NoError(t, err)
		require.Equal(t, data[off:off+int64(len(got))], got, "the range at %d", off)
	}
	require.NoError(t, r.Close())

	keys := objects(t, s)
	require.Len(t, keys, 1)
	object := make([]byte, stored)
	n, err := s.ReadAt(context.Background(), keys[0], object, 0)
	require.NoError(t, err)
	require.Equal(t, int(stored), n)
	assert.False(t, bytes.Contains(object, []byte("plaintext-marker")), "the object is sealed")

	require.NoError(t, f.Release())
	assert.Empty(t, objects(t, s), "release removes the file's object")
	assert.Empty(t, backendFiles(t, s), "nothing of the file is left in the backend")
	assert.Zero(t, m.Used())
	assert.Zero(t, rt.Used())
	assert.Zero(t, shared.Used())
}

// Closing the manager removes every object of the plan: finished files, a file whose upload is
// in progress (aborted), and leaves the objects of another plan of the same Remote alone.
func TestRemoteObjectsGoWithThePlan(t *testing.T) {
	s := testStore(t)
	rt := newRemote(t, s, 1<<30)
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), rt, nil)
	other, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), rt, nil)

	for i := range 2 {
		w, err := m.CreateFramedFile()
		require.NoError(t, err)
		writeFramed(t, w, spillData(1<<20*(i+1), uint64(i)))
	}
	inFlight, err := m.CreateFramedFile()
	require.NoError(t, err)
	_, err = inFlight.Write(spillData(spill.RemotePartSize+1<<20, 9)) // a part is sent
	require.NoError(t, err)
	kept, err := other.CreateFramedFile()
	require.NoError(t, err)
	writeFramed(t, kept, spillData(1000, 10))
	require.Len(t, objects(t, s), 3)

	require.NoError(t, m.Close())
	keys := objects(t, s)
	require.Len(t, keys, 1, "only the other plan's object is left")
	assert.True(t, strings.HasSuffix(kept.File().Path(), keys[0]))
	assert.Equal(t, kept.StoredSize(), rt.Used(), "the closed plan's bytes were given back")
	assert.Equal(t, []string{keys[0]}, backendFiles(t, s), "the upload in progress was aborted: no part is left")

	require.NoError(t, other.Close())
	assert.Empty(t, objects(t, s))
	assert.Zero(t, rt.Used())
}

// The remote cap refuses a write that would pass it, as the local limits do: it names the
// setting, writes nothing, and every budget is as before.
func TestRemoteCapRefusesAWriteOverIt(t *testing.T) {
	s := testStore(t)
	rt := newRemote(t, s, 1<<20)
	m, shared := remoteManager(t, []string{t.TempDir()}, givenUp(), rt, nil)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	random := make([]byte, 4<<20) // incompressible: framed, it is over 1 MiB
	_, _ = crand.Read(random)
	_, err = w.Write(random)
	var limit *spill.LimitError
	require.ErrorAs(t, err, &limit)
	assert.True(t, limit.Remote)
	assert.Equal(t, "test.remote.maxSize", limit.Setting)
	assert.Contains(t, err.Error(), "raise test.remote.maxSize")
	assert.Equal(t, w.StoredSize(), rt.Used(), "only the chunks appended before are counted")
	assert.Equal(t, rt.Used(), m.Used())
	assert.Equal(t, rt.Used(), shared.Used())
	assert.LessOrEqual(t, rt.Used(), int64(1<<20))
	w.Discard()
	require.NoError(t, w.File().Release())
	assert.Zero(t, rt.Used())
	assert.Empty(t, objects(t, s))
}

// A changed object is an error at read, naming the file, never wrong bytes.
func TestRemoteTamperedObjectIsDetectedAtRead(t *testing.T) {
	s := testStore(t)
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), newRemote(t, s, 1<<30), nil)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	data := spillData(600<<10, 3)
	writeFramed(t, w, data)
	keys := objects(t, s)
	require.Len(t, keys, 1)
	object := make([]byte, w.StoredSize())
	_, err = s.ReadAt(context.Background(), keys[0], object, 0)
	require.NoError(t, err)
	object[len(object)/2] ^= 0x40
	require.NoError(t, s.Put(context.Background(), keys[0], object))

	r, err := w.File().OpenReader(spill.ReaderOptions{})
	require.NoError(t, err)
	defer r.Close()
	_, err = io.ReadAll(r)
	var format *chunkfile.FormatError
	require.True(t, errors.As(err, &format), "a tampered chunk fails: %v", err)
	assert.Contains(t, err.Error(), w.File().Path())
}
