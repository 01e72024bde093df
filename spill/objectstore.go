package spill

import "context"

// ObjectStore is the seam between the disk manager and an object store (the remote tier, see
// Remote): the few calls a spill file needs, in the store's own terms, so that another store
// (GCS, ABFS, HDFS) is one more implementation and nothing above spill changes. The S3 one is
// spill/s3store. Keys are relative to the store's own bucket and prefix.
//
// Every call is bounded by its ctx; an error names the object and never a credential.
type ObjectStore interface {
	// Location names the store for messages (say s3a://bucket/prefix), never a credential.
	Location() string
	// Put stores p whole as the object key, replacing any object there.
	Put(ctx context.Context, key string, p []byte) error
	// StartUpload begins a multipart upload of the object key: parts sent in order, the object
	// appearing only at Complete. An upload that is not completed must be aborted.
	StartUpload(ctx context.Context, key string) (Upload, error)
	// ReadAt reads len(p) bytes of the object key from off (one ranged GET), as io.ReaderAt
	// does: fewer bytes only at the object's end, with io.EOF.
	ReadAt(ctx context.Context, key string, p []byte, off int64) (int, error)
	// Delete removes the object key; an object already gone is no error.
	Delete(ctx context.Context, key string) error
	// List returns the keys of every object whose key starts with prefix.
	List(ctx context.Context, prefix string) ([]string, error)
}

// Upload is a multipart upload in progress.
type Upload interface {
	// WritePart sends part number n (from 1, in order) of the object; every part but the last
	// is RemotePartSize bytes.
	WritePart(ctx context.Context, n int, p []byte) error
	// Complete makes the object of the parts sent, in their order.
	Complete(ctx context.Context) error
	// Abort drops the parts sent; no object appears. Safe after a failed WritePart or Complete.
	Abort(ctx context.Context) error
}
