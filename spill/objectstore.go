package spill

import (
	"context"
	"errors"
	"time"
)

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
	// List returns every object whose key starts with prefix.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// ListUploads returns every multipart upload begun and neither completed nor aborted whose
	// key starts with prefix: what a process killed mid-upload leaves behind. A store that
	// cannot list them answers ErrUploadsNotListed (the bucket's lifecycle rule aborts them).
	ListUploads(ctx context.Context, prefix string) ([]PendingUpload, error)
	// AbortUpload aborts the upload id of the object key (from ListUploads); an upload already
	// gone is no error.
	AbortUpload(ctx context.Context, key, id string) error
}

// ErrUploadsNotListed is ListUploads' answer from a store that cannot list uploads in progress.
var ErrUploadsNotListed = errors.New("the store does not list multipart uploads in progress")

// ObjectInfo is an object of a List.
type ObjectInfo struct {
	Key      string
	Modified time.Time // by the store's clock
}

// PendingUpload is an upload of a ListUploads.
type PendingUpload struct {
	Key, ID string
	Started time.Time // by the store's clock
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
