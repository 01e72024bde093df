package plan

import (
	"context"
	"fmt"
	"net/url"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/s3store"
)

// The settings of the remote tier, named by its errors: the two of Spillway, and the S3A keys
// of the application (as Spark passes Hadoop keys, under spark.hadoop.).
const (
	RemoteURIKey     = "spark.spillway.remote.uri"
	RemoteMaxSizeKey = "spark.spillway.remote.maxSize"

	S3AEndpointKey  = "spark.hadoop.fs.s3a.endpoint"
	S3ARegionKey    = "spark.hadoop.fs.s3a.endpoint.region"
	S3AAccessKeyKey = "spark.hadoop.fs.s3a.access.key"
	S3ASecretKeyKey = "spark.hadoop.fs.s3a.secret.key"
	S3APathStyleKey = "spark.hadoop.fs.s3a.path.style.access"
)

// RemoteSettings configure the remote tier (ConfigureRemote). Empty strings are unset.
type RemoteSettings struct {
	URI                  string // s3a://bucket/prefix or s3://bucket/prefix
	Endpoint, Region     string
	AccessKey, SecretKey string // both or neither: neither takes the store's standard credential chain
	PathStyle, SSL       bool
	MaxSize              int64 // bytes all remote files of the process may hold together
	// Application is the id of the application the process works for (spark.app.id): its
	// processes share the prefix spill.ApplicationName(Application) that its driver sweeps.
	Application string
}

// remoteSettingNames are the keys behind RemoteSettings, for the store's messages.
var remoteSettingNames = s3store.Settings{
	URI: RemoteURIKey, Endpoint: S3AEndpointKey, Region: S3ARegionKey,
	AccessKey: S3AAccessKeyKey, SecretKey: S3ASecretKeyKey, PathStyle: S3APathStyleKey,
}

// ConfigureRemote puts an object store behind the local dirs of the plans created from now on
// (spill.Remote): their framed files go there when no local dir can take them. It builds the
// store for the URI's scheme, then probes it by writing and removing one small object, so that
// a wrong endpoint, a missing bucket or refused credentials fail here, naming the key to fix
// (an *s3store.ProbeError). A bad value is an *ArgumentError or a *spill.ConfigError naming its
// key. On any error the tier is as it was. No message carries a credential. An empty URI
// takes the tier away from the plans created from now on.
func (r *Registry) ConfigureRemote(s RemoteSettings) error {
	if s.URI == "" {
		r.remote.Store(nil) // plans created from now on have no tier; earlier ones keep theirs
		return nil
	}
	if s.MaxSize < 0 {
		return &ArgumentError{Reason: fmt.Sprintf("%s is negative (%d); give 0 or more bytes", RemoteMaxSizeKey, s.MaxSize)}
	}
	store, err := newRemoteStore(s, func() { r.shared.Stats.RemoteRetries.Add(1) })
	if err != nil {
		return err
	}
	if err := store.Probe(context.Background()); err != nil {
		return err
	}
	rt, err := spill.NewRemote(spill.RemoteConfig{Store: store, Limit: s.MaxSize, LimitSetting: RemoteMaxSizeKey,
		Application: spill.ApplicationName(s.Application)})
	if err != nil {
		return err
	}
	r.remote.Store(rt)
	return nil
}

// probedStore is an object store that can be probed before the tier takes it.
type probedStore interface {
	spill.ObjectStore
	Probe(context.Context) error
}

// newRemoteStore builds the store for the settings' URI scheme; it makes no call. onRetry, if
// not nil, is called for each answer of the store that its client retries. A bad value is an
// *ArgumentError or a *spill.ConfigError naming its key.
func newRemoteStore(s RemoteSettings, onRetry func()) (probedStore, error) {
	u, err := url.Parse(s.URI)
	if err != nil {
		return nil, &ArgumentError{Reason: fmt.Sprintf("%s %q is not a URI; give s3a://bucket/prefix", RemoteURIKey, s.URI)}
	}
	switch u.Scheme {
	case "s3a", "s3":
		st, err := s3store.New(s3store.Config{
			URI: s.URI, Endpoint: s.Endpoint, Region: s.Region, AccessKey: s.AccessKey, SecretKey: s.SecretKey,
			PathStyle: s.PathStyle, SSL: s.SSL, Settings: remoteSettingNames, OnRetry: onRetry,
		})
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return st, nil
	default:
		return nil, &ArgumentError{Reason: fmt.Sprintf("%s %q: the scheme %q is not supported; give s3a://bucket/prefix or s3://bucket/prefix", RemoteURIKey, s.URI, u.Scheme)}
	}
}

// Remote is the remote tier plans created now take; nil when none is configured.
func (r *Registry) Remote() *spill.Remote { return r.remote.Load() }
