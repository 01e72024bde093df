package chunkfile_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/spillway/spillway/spill/chunkfile"
)

// FuzzRead feeds the Reader arbitrary files. It must never panic; any failure must be a
// *FormatError (the source, in memory, never fails) after whole chunks only; and what it does
// decode must come out the same with read-ahead and without, and match the size Seek reports.
// Sealed inputs are opened with the test key of their key size, as the vectors are. Seeds:
// testdata/fuzz/FuzzRead (made from the shared vectors by TestVectors -update).
func FuzzRead(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte(chunkfile.Magic))
	f.Fuzz(func(t *testing.T, file []byte) {
		key := vectorKey(t, file)
		got, err := decode(file, key, chunkfile.ReaderOptions{Synchronous: true})
		if err != nil {
			var fe *chunkfile.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("failed with %T, not a *FormatError: %v", err, err)
			}
			if len(got) > 0 && len(got)%chunkSizeOf(file) != 0 {
				t.Fatalf("returned %d bytes before failing: part of a chunk", len(got))
			}
			return
		}
		again, err := decode(file, key, chunkfile.ReaderOptions{})
		if err != nil || !bytes.Equal(got, again) {
			t.Fatalf("read-ahead disagrees: %v, %d vs %d bytes", err, len(again), len(got))
		}
		r, err := chunkfile.NewReader(bytes.NewReader(file), int64(len(file)), key, chunkfile.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		end, err := r.Seek(0, io.SeekEnd)
		if err != nil || end != int64(len(got)) {
			t.Fatalf("Seek to the end gives %d, %v; %d bytes were read", end, err, len(got))
		}
	})
}

func chunkSizeOf(file []byte) int { return 1 << file[12] }
