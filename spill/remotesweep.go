package spill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The sweep of the remote tier. A process's files live under its application's prefix,
// spillway-app-<application>/ (RemoteConfig.Application); the process that speaks for the
// application (the Spark driver) marks it alive, by rewriting one small object under it, the
// marker, more often than a sweep's age; at its end it removes the whole prefix
// (RemoveApplication). What a killed application leaves is taken by the next application's
// sweep (SweepApplications): a name of ours under the store's prefix whose newest object or
// upload is older than the age is taken for an application that is no longer running, since a
// running one would have rewritten its marker since. Ages are read on the store's clock (the
// marker's own time), never the process's, so a skewed clock cannot make a live prefix look old.
// Names that are not ours (not starting with DirPrefix) are never touched.

// ApplicationPrefix starts the name of every application's prefix in the store.
const ApplicationPrefix = DirPrefix + "app-"

// ApplicationMarker is the name of the marker under an application's prefix.
const ApplicationMarker = "alive"

// MaxApplicationName is the longest name an application may have.
const MaxApplicationName = 128

func checkApplication(name string) error {
	if name == "" || len(name) > MaxApplicationName || strings.Trim(name, ".") == "" ||
		strings.IndexFunc(name, func(r rune) bool { return !applicationRune(r) }) >= 0 {
		return &ConfigError{Reason: fmt.Sprintf("the remote tier's application name %q is not 1 to %d letters, digits, '.', '_' or '-'", name, MaxApplicationName)}
	}
	return nil
}

func applicationRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// ApplicationName makes an application name of id (a Spark application id, say): each rune
// that a name cannot hold becomes '_', and the name is cut at MaxApplicationName.
func ApplicationName(id string) string {
	b := []rune(id)
	for i, r := range b {
		if !applicationRune(r) {
			b[i] = '_'
		}
	}
	if len(b) > MaxApplicationName {
		b = b[:MaxApplicationName]
	}
	if len(b) == 0 || strings.Trim(string(b), ".") == "" {
		return "unnamed"
	}
	return string(b)
}

func applicationPrefix(app string) string { return ApplicationPrefix + app + "/" }

// SweepResult says what a sweep removed.
type SweepResult struct {
	Prefixes int // prefixes of ours taken for dead and removed
	Objects  int // objects deleted
	Uploads  int // incomplete multipart uploads aborted
	// UploadsNotListed: the store cannot list uploads in progress (ErrUploadsNotListed), so
	// none was aborted; the bucket's lifecycle rule for incomplete uploads takes them.
	UploadsNotListed bool
}

func (r *SweepResult) add(o SweepResult) {
	r.Prefixes += o.Prefixes
	r.Objects += o.Objects
	r.Uploads += o.Uploads
	r.UploadsNotListed = r.UploadsNotListed || o.UploadsNotListed
}

// MarkApplication writes the application's marker, or rewrites it, and returns the time the
// store gave it: the store's now.
func MarkApplication(ctx context.Context, store ObjectStore, app string) (time.Time, error) {
	if err := checkApplication(app); err != nil {
		return time.Time{}, err
	}
	key := applicationPrefix(app) + ApplicationMarker
	if err := store.Put(ctx, key, []byte("spillway: the application "+app+" is running\n")); err != nil {
		return time.Time{}, &RemoteError{Op: "put", Location: store.Location() + "/" + key, Err: err}
	}
	objs, err := store.List(ctx, key)
	if err != nil {
		return time.Time{}, &RemoteError{Op: "list", Location: store.Location() + "/" + key, Err: err}
	}
	for _, o := range objs {
		if o.Key == key {
			return o.Modified, nil
		}
	}
	return time.Time{}, &RemoteError{Op: "list", Location: store.Location() + "/" + key, Err: errors.New("the marker just written is not listed")}
}

// SweepApplications marks app alive (MarkApplication), then removes every other prefix of ours
// in the store whose newest object or upload is older than olderThan by the store's clock: its
// objects deleted, its uploads aborted. A process that speaks for a running application calls
// MarkApplication (or this) more often than olderThan, so its prefix is never taken. An error
// joins every call that failed; what could be removed was.
func SweepApplications(ctx context.Context, store ObjectStore, app string, olderThan time.Duration) (SweepResult, error) {
	if olderThan <= 0 {
		return SweepResult{}, &ConfigError{Reason: fmt.Sprintf("the remote sweep's age is %v; give a positive duration", olderThan)}
	}
	now, err := MarkApplication(ctx, store, app)
	if err != nil {
		return SweepResult{}, err
	}
	objs, err := store.List(ctx, DirPrefix)
	if err != nil {
		return SweepResult{}, &RemoteError{Op: "list", Location: store.Location() + "/" + DirPrefix, Err: err}
	}
	var res SweepResult
	ups, err := store.ListUploads(ctx, DirPrefix)
	switch {
	case errors.Is(err, ErrUploadsNotListed):
		res.UploadsNotListed = true
	case err != nil:
		return SweepResult{}, &RemoteError{Op: "list uploads", Location: store.Location() + "/" + DirPrefix, Err: err}
	}
	// Each key by its first name: a prefix of ours (name/...), or a lone object (a probe's).
	type group struct {
		newest time.Time
		dir    bool
	}
	groups := map[string]*group{}
	see := func(key string, t time.Time) {
		name, _, dir := strings.Cut(key, "/")
		g := groups[name]
		if g == nil {
			g = &group{newest: t, dir: dir}
			groups[name] = g
		}
		if t.After(g.newest) {
			g.newest = t
		}
	}
	for _, o := range objs {
		see(o.Key, o.Modified)
	}
	for _, u := range ups {
		see(u.Key, u.Started)
	}
	own := ApplicationPrefix + app
	var errs []error
	for name, g := range groups {
		if name == own || now.Sub(g.newest) <= olderThan {
			continue
		}
		under := name
		if g.dir {
			under += "/"
		}
		r, err := removeUnder(ctx, store, under)
		res.add(r)
		if r.Objects+r.Uploads > 0 {
			res.Prefixes++
		}
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// RemoveApplication deletes every object under the application's prefix, its marker included,
// and aborts every upload there: what the application's end leaves of it, which is nothing.
func RemoveApplication(ctx context.Context, store ObjectStore, app string) (SweepResult, error) {
	if err := checkApplication(app); err != nil {
		return SweepResult{}, err
	}
	return removeUnder(ctx, store, applicationPrefix(app))
}

// removeUnder aborts every upload and deletes every object whose key starts with prefix. An
// error joins every call that failed.
func removeUnder(ctx context.Context, store ObjectStore, prefix string) (SweepResult, error) {
	var res SweepResult
	var errs []error
	if ups, err := store.ListUploads(ctx, prefix); errors.Is(err, ErrUploadsNotListed) {
		res.UploadsNotListed = true
	} else if err != nil {
		errs = append(errs, &RemoteError{Op: "list uploads", Location: store.Location() + "/" + prefix, Err: err})
	} else {
		for _, u := range ups {
			if err := store.AbortUpload(ctx, u.Key, u.ID); err != nil {
				errs = append(errs, &RemoteError{Op: "abort upload", Location: store.Location() + "/" + u.Key, Err: err})
				continue
			}
			res.Uploads++
		}
	}
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return res, errors.Join(append(errs, &RemoteError{Op: "list", Location: store.Location() + "/" + prefix, Err: err})...)
	}
	for _, o := range objs {
		if err := store.Delete(ctx, o.Key); err != nil {
			errs = append(errs, &RemoteError{Op: "delete", Location: store.Location() + "/" + o.Key, Err: err})
			continue
		}
		res.Objects++
	}
	return res, errors.Join(errs...)
}
