// Package s3store is the remote tier's S3 store (spill.ObjectStore) over minio-go: AWS S3 and
// the S3-compatible stores, addressed as s3a:// or s3:// URIs, configured with the settings a
// Hadoop S3A user already has. Building a Store makes no call; Probe makes one small object and
// removes it, and says which setting to fix when that fails. No message carries a credential.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/spillway/spillway/spill"
)

// MaxRetries is how many times the client sends a request that failed in a way worth retrying
// (a dropped connection, a 5xx, 503 SlowDown), with its own exponential backoff in between; the
// caller's context (spill.RemoteConfig.CallTimeout) bounds the whole.
const MaxRetries = 5

// DefaultEndpoint is the endpoint when none is given: AWS S3, whose regional endpoints the client
// finds from the bucket's region.
const DefaultEndpoint = "s3.amazonaws.com"

// Config is a Store's configuration: the fields of S3A's settings.
type Config struct {
	URI string // s3a://bucket/prefix or s3://bucket/prefix; the prefix is optional
	// Endpoint is host[:port], or a URL whose scheme then decides TLS; "" for DefaultEndpoint.
	Endpoint string
	Region   string // "" lets the client ask the store for the bucket's region
	// AccessKey and SecretKey are static credentials, both or neither; neither takes the standard
	// chain: the AWS_* environment, the shared credentials file, web identity (a token file and a
	// role, as on EKS), then the container's or the instance's role.
	AccessKey, SecretKey string
	PathStyle            bool // path-style requests (host/bucket/key); else the client picks, by host
	SSL                  bool // TLS when Endpoint has no scheme
	// Settings names the configuration behind each field, for messages that say what to fix.
	Settings Settings
	// OnRetry, if not nil, is called for each answer the client retries: a status it retries
	// (retried.go) or a failed request, while the call's context is live. It must be quick.
	OnRetry func()
}

// Settings names the configuration keys behind a Config (Spark or Hadoop keys, say); any may be
// empty.
type Settings struct {
	URI, Endpoint, Region, AccessKey, SecretKey, PathStyle string
}

// Store is a bucket and a prefix in an S3-compatible store. It is safe for concurrent use.
type Store struct {
	core     minio.Core
	bucket   string
	prefix   string // "" or ending in "/"
	location string // scheme://bucket/prefix, for messages
	endpoint string // for messages
	settings Settings
}

var _ spill.ObjectStore = (*Store)(nil)

// New returns a Store for cfg. It makes no call to the store; a bad URI or endpoint is a
// *spill.ConfigError naming its setting.
func New(cfg Config) (*Store, error) {
	u, err := url.Parse(cfg.URI)
	if err != nil || (u.Scheme != "s3a" && u.Scheme != "s3") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, &spill.ConfigError{Reason: fmt.Sprintf("the remote spill URI %q is not s3a://bucket/prefix or s3://bucket/prefix; fix %s", cfg.URI, cfg.Settings.URI)}
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		prefix += "/"
	}
	host, secure := cfg.Endpoint, cfg.SSL
	if host == "" {
		host = DefaultEndpoint
	}
	if strings.Contains(host, "://") {
		e, err := url.Parse(host)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || strings.Trim(e.Path, "/") != "" {
			return nil, &spill.ConfigError{Reason: fmt.Sprintf("the endpoint %q is not host[:port] or http(s)://host[:port]; fix %s", cfg.Endpoint, cfg.Settings.Endpoint)}
		}
		host, secure = e.Host, e.Scheme == "https"
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return nil, &spill.ConfigError{Reason: fmt.Sprintf("only one of %s and %s is set; set both, or neither to use the standard credential chain", cfg.Settings.AccessKey, cfg.Settings.SecretKey)}
	}
	creds := credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")
	if cfg.AccessKey == "" {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{},
		})
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	transport, err := newTransport(secure, cfg.OnRetry)
	if err != nil {
		return nil, &spill.ConfigError{Reason: fmt.Sprintf("the endpoint %q: %v; fix %s", host, err, cfg.Settings.Endpoint)}
	}
	c, err := minio.New(host, &minio.Options{Creds: creds, Secure: secure, Region: cfg.Region, BucketLookup: lookup,
		MaxRetries: MaxRetries, Transport: transport})
	if err != nil {
		return nil, &spill.ConfigError{Reason: fmt.Sprintf("the endpoint %q: %v; fix %s", host, err, cfg.Settings.Endpoint)}
	}
	return &Store{
		core: minio.Core{Client: c}, bucket: u.Host, prefix: prefix,
		location: u.Scheme + "://" + u.Host + "/" + strings.TrimSuffix(prefix, "/"),
		endpoint: host, settings: cfg.Settings,
	}, nil
}

// Location is scheme://bucket/prefix.
func (s *Store) Location() string { return strings.TrimSuffix(s.location, "/") }

func (s *Store) Put(ctx context.Context, key string, p []byte) error {
	_, err := s.core.PutObject(ctx, s.bucket, s.prefix+key, bytes.NewReader(p), int64(len(p)), "", "", minio.PutObjectOptions{})
	return err
}

func (s *Store) StartUpload(ctx context.Context, key string) (spill.Upload, error) {
	id, err := s.core.NewMultipartUpload(ctx, s.bucket, s.prefix+key, minio.PutObjectOptions{})
	if err != nil {
		return nil, err
	}
	return &upload{s: s, key: s.prefix + key, id: id}, nil
}

func (s *Store) ReadAt(ctx context.Context, key string, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
		return 0, err
	}
	body, info, header, err := s.core.GetObject(ctx, s.bucket, s.prefix+key, opts)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "InvalidRange" { // off is at or past the end
			return 0, io.EOF
		}
		return 0, err
	}
	defer body.Close()
	n, err := io.ReadFull(body, p)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		// The body ended before p was full: at the object's end if the response said it would
		// be this short, else the response was cut (a dropped connection, a server that died
		// mid-response), which is a failed get, never a file that ends early.
		if want := responseLength(info, header); want >= 0 && int64(n) < want {
			return n, fmt.Errorf("the response ended after %d of its %d bytes: %w", n, want, io.ErrUnexpectedEOF)
		}
		err = io.EOF
	}
	return n, err
}

// responseLength is the bytes a ranged GET's response says its body holds (Content-Length, else
// Content-Range), or -1 when it says neither.
func responseLength(info minio.ObjectInfo, header http.Header) int64 {
	if info.Size >= 0 {
		return info.Size
	}
	var from, to int64
	if _, err := fmt.Sscanf(header.Get("Content-Range"), "bytes %d-%d/", &from, &to); err == nil && to >= from {
		return to - from + 1
	}
	return -1
}

func (s *Store) Delete(ctx context.Context, key string) error {
	return s.core.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{})
}

// List lists the objects under prefix, leaving out keys that end in "/".
func (s *Store) List(ctx context.Context, prefix string) ([]spill.ObjectInfo, error) {
	var objs []spill.ObjectInfo
	for o := range s.core.Client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, o.Err
		}
		if strings.HasSuffix(o.Key, "/") {
			continue // a directory marker (a filesystem backend lists its dirs so), never an object of ours
		}
		objs = append(objs, spill.ObjectInfo{Key: strings.TrimPrefix(o.Key, s.prefix), Modified: o.LastModified})
	}
	return objs, nil
}

// ListUploads lists the incomplete multipart uploads under prefix, page by page.
func (s *Store) ListUploads(ctx context.Context, prefix string) ([]spill.PendingUpload, error) {
	var ups []spill.PendingUpload
	keyMarker, idMarker := "", ""
	for {
		page, err := s.core.ListMultipartUploads(ctx, s.bucket, s.prefix+prefix, keyMarker, idMarker, "", 1000)
		if r := minio.ToErrorResponse(err); r.StatusCode == http.StatusNotImplemented || r.Code == "NotImplemented" {
			return nil, spill.ErrUploadsNotListed // s3proxy's, among others
		}
		if err != nil {
			return nil, err
		}
		for _, u := range page.Uploads {
			ups = append(ups, spill.PendingUpload{Key: strings.TrimPrefix(u.Key, s.prefix), ID: u.UploadID, Started: u.Initiated})
		}
		if !page.IsTruncated || (page.NextKeyMarker == keyMarker && page.NextUploadIDMarker == idMarker) {
			return ups, nil
		}
		keyMarker, idMarker = page.NextKeyMarker, page.NextUploadIDMarker
	}
}

// AbortUpload aborts an upload of ListUploads; one already gone is no error.
func (s *Store) AbortUpload(ctx context.Context, key, id string) error {
	err := s.core.AbortMultipartUpload(ctx, s.bucket, s.prefix+key, id)
	if code := minio.ToErrorResponse(err).Code; code == "NoSuchUpload" {
		return nil
	}
	return err
}

// upload is a multipart upload; its parts are kept for Complete.
type upload struct {
	s     *Store
	key   string
	id    string
	parts []minio.CompletePart
}

func (u *upload) WritePart(ctx context.Context, n int, p []byte) error {
	part, err := u.s.core.PutObjectPart(ctx, u.s.bucket, u.key, u.id, n, bytes.NewReader(p), int64(len(p)), minio.PutObjectPartOptions{})
	if err != nil {
		return err
	}
	u.parts = append(u.parts, minio.CompletePart{PartNumber: n, ETag: part.ETag})
	return nil
}

func (u *upload) Complete(ctx context.Context) error {
	_, err := u.s.core.CompleteMultipartUpload(ctx, u.s.bucket, u.key, u.id, u.parts, minio.PutObjectOptions{})
	return err
}

func (u *upload) Abort(ctx context.Context) error {
	return u.s.core.AbortMultipartUpload(ctx, u.s.bucket, u.key, u.id)
}
