package plan

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
)

func readAll(t *testing.T, r *Registry, rh uint64, bufSize int) ([]byte, error) {
	t.Helper()
	var out []byte
	buf := make([]byte, bufSize)
	for {
		n, err := r.Read(rh, buf)
		if err != nil {
			return out, err
		}
		if n < 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}

func TestFramedFilesThroughTheRegistry(t *testing.T) {
	for _, tc := range []struct {
		codec   string
		encrypt bool
	}{{"none", false}, {"lz4", true}, {"zstd", false}, {"ZSTD", true}, {"org.apache.spark.io.LZ4CompressionCodec", false}} {
		t.Run(fmt.Sprintf("%s/encrypt=%v", tc.codec, tc.encrypt), func(t *testing.T) {
			dirs, ld := localDirs(t, 1)
			r := NewRegistry(nil)
			require.NoError(t, r.ConfigureFormat(tc.codec, 3, tc.encrypt, 192))
			h, err := r.CreatePlan(ld, 1<<30, Unlimited)
			require.NoError(t, err)
			fh, err := r.CreateSpillFile(h)
			require.NoError(t, err)
			data := bytes.Repeat([]byte("MARKER-0123456789 some spilled row\n"), 30_000) // ~1 MiB
			for p := data; len(p) > 0; p = p[min(len(p), 70_001):] {
				require.NoError(t, r.Write(fh, p[:min(len(p), 70_001)]))
			}
			_, err = r.OpenReader(fh)
			require.ErrorIs(t, err, chunkErrNotFinished(), "not before FinishWrite")
			require.NoError(t, r.FinishWrite(fh))
			require.NoError(t, r.FinishWrite(fh), "finishing twice is the first result")
			logical, stored, err := r.FileSizes(fh)
			require.NoError(t, err)
			assert.Equal(t, int64(len(data)), logical)
			used, err := r.UsedDiskSpace(h)
			require.NoError(t, err)
			assert.Equal(t, stored, used, "usedDiskSpace counts bytes on disk")
			path, err := r.Path(fh)
			require.NoError(t, err)
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, int64(len(raw)), stored)
			assert.Equal(t, tc.encrypt, !bytes.Contains(raw, []byte("MARKER")), "plaintext on disk only when not sealed")
			st := r.Stats()
			assert.Equal(t, stored, st.BytesWritten)
			assert.Equal(t, int64(len(data)), st.LogicalBytesWritten)

			rh, err := r.OpenReader(fh)
			require.NoError(t, err)
			got, err := readAll(t, r, rh, 10_000)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(data, got))
			n, err := r.Read(rh, make([]byte, 10))
			require.NoError(t, err)
			assert.Equal(t, -1, n, "-1 again at the end")
			require.NoError(t, r.CloseReader(rh))
			var he *HandleError
			require.ErrorAs(t, r.CloseReader(rh), &he)
			_, err = r.Read(rh, make([]byte, 10))
			require.ErrorAs(t, err, &he)

			// A reader left open is closed with the plan.
			_, err = r.OpenReader(fh)
			require.NoError(t, err)
			assert.Equal(t, 1, r.LiveReaders())
			require.NoError(t, r.ReleasePlan(h))
			assert.Zero(t, r.LiveReaders())
			assert.Zero(t, r.LiveFiles())
			assert.Len(t, listing(t, dirs), 1, "only the root is left")
		})
	}
}

func chunkErrNotFinished() error { return spill.ErrNotFinished }

func TestCorruptFramedFileNamesFileAndChunk(t *testing.T) {
	_, ld := localDirs(t, 1)
	r := NewRegistry(nil)
	require.NoError(t, r.ConfigureFormat("lz4", 1, true, 128))
	h, err := r.CreatePlan(ld, 1<<30, Unlimited)
	require.NoError(t, err)
	defer r.ReleasePlan(h)
	fh, err := r.CreateSpillFile(h)
	require.NoError(t, err)
	data := bytes.Repeat([]byte("abcdefgh"), 100_000)
	require.NoError(t, r.Write(fh, data))
	require.NoError(t, r.FinishWrite(fh))
	path, err := r.Path(fh)
	require.NoError(t, err)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	raw[len(raw)-5] ^= 1
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	rh, err := r.OpenReader(fh)
	require.NoError(t, err)
	got, err := readAll(t, r, rh, 1<<16)
	var fe *chunkfile.FormatError
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), fmt.Sprintf("chunk %d", fe.Chunk))
	assert.Equal(t, KindIO, Classify(err), "a corrupt file is an IOException")
	assert.True(t, bytes.HasPrefix(data, got))
	_, err = r.Read(rh, make([]byte, 10))
	require.ErrorAs(t, err, &fe, "every later read fails too")
}

func TestConfigureFormatRejectsBadValues(t *testing.T) {
	r := NewRegistry(nil)
	for _, tc := range []struct {
		codec string
		level int
		bits  int
		want  string
	}{
		{"snappy", 1, 128, "none, lz4, zstd"},
		{"gzip", 1, 128, "none, lz4, zstd"},
		{"zstd", 0, 128, "1 to 22"},
		{"zstd", 23, 128, "1 to 22"},
		{"lz4", 1, 100, "128, 192 or 256"},
	} {
		err := r.ConfigureFormat(tc.codec, tc.level, true, tc.bits)
		require.Error(t, err, "%+v", tc)
		assert.Equal(t, KindInvalidArgument, Classify(err), "%v", err)
		assert.Contains(t, err.Error(), tc.want)
	}
	assert.Equal(t, chunkfile.None, r.Format().Codec, "a refused format changes nothing")
	assert.Nil(t, r.Format().Key)

	// A plan keeps the format it was created with.
	_, ld := localDirs(t, 1)
	require.NoError(t, r.ConfigureFormat("none", 1, false, 128))
	h, err := r.CreatePlan(ld, 1<<30, Unlimited)
	require.NoError(t, err)
	defer r.ReleasePlan(h)
	require.NoError(t, r.ConfigureFormat("lz4", 1, true, 256))
	fh, err := r.CreateSpillFile(h)
	require.NoError(t, err)
	require.NoError(t, r.Write(fh, bytes.Repeat([]byte("x"), 100)))
	require.NoError(t, r.FinishWrite(fh))
	path, err := r.Path(fh)
	require.NoError(t, err)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Contains(raw, bytes.Repeat([]byte("x"), 100)), "still none, unsealed")
}

func TestTmpFilesAreNotFramed(t *testing.T) {
	_, ld := localDirs(t, 1)
	r := NewRegistry(nil)
	h, err := r.CreatePlan(ld, 1<<30, Unlimited)
	require.NoError(t, err)
	defer r.ReleasePlan(h)
	fh, err := r.CreateTmpFile(h)
	require.NoError(t, err)
	require.NoError(t, r.Write(fh, []byte("raw")))
	require.ErrorIs(t, r.FinishWrite(fh), ErrTmpFile)
	_, err = r.OpenReader(fh)
	require.ErrorIs(t, err, ErrTmpFile)
	assert.Equal(t, KindInvalidHandle, Classify(ErrTmpFile))
}

// Each kind of file has its release: a handle given to the other kind's is refused, names the
// right call, and leaves the file live; its own release then deletes it.
func TestEachKindOfFileHasItsRelease(t *testing.T) {
	_, ld := localDirs(t, 1)
	r := NewRegistry(nil)
	h, err := r.CreatePlan(ld, 1<<30, Unlimited)
	require.NoError(t, err)
	defer r.ReleasePlan(h)
	tmp, err := r.CreateTmpFile(h)
	require.NoError(t, err)
	spillFile, err := r.CreateSpillFile(h)
	require.NoError(t, err)
	require.ErrorIs(t, r.ReleaseSpillFile(tmp), ErrTmpFile)
	require.ErrorIs(t, r.ReleaseTmpFile(spillFile), ErrSpillFile)
	assert.Equal(t, KindInvalidHandle, Classify(ErrSpillFile))
	assert.Contains(t, ErrSpillFile.Error(), "releaseSpillFile")
	assert.Equal(t, 2, r.LiveFiles(), "a refused release leaves the file live")
	for _, fh := range []uint64{tmp, spillFile} {
		path, err := r.Path(fh)
		require.NoError(t, err)
		assert.FileExists(t, path)
	}
	require.NoError(t, r.ReleaseTmpFile(tmp))
	require.NoError(t, r.ReleaseSpillFile(spillFile))
	assert.Zero(t, r.LiveFiles())
	var handle *HandleError
	require.ErrorAs(t, r.ReleaseSpillFile(spillFile), &handle, "released twice")
}
