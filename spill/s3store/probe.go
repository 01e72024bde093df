package s3store

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/minio/minio-go/v7"
)

// ProbeTimeout bounds Probe, its retries included: an executor that cannot reach its store
// fails at start within this time.
const ProbeTimeout = 30 * time.Second

// ProbePrefix starts the name of Probe's object, under the store's prefix.
const ProbePrefix = "spillway-probe-"

// ProbeError is a store that failed Probe: what failed, what to fix, and the store's cause. It
// never carries a credential.
type ProbeError struct {
	Location string
	Problem  string // what is wrong, naming the setting to fix
	Err      error
}

func (e *ProbeError) Error() string {
	return fmt.Sprintf("spill: the remote spill store %s is not usable: %s (%v)", e.Location, e.Problem, e.Err)
}

func (e *ProbeError) Unwrap() error { return e.Err }

// Probe writes one small object under the store's prefix and removes it, so that a wrong
// endpoint, a missing bucket or refused credentials are found now, with the setting to fix,
// rather than at the first spill. It takes at most ProbeTimeout.
func (s *Store) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	key := ProbePrefix + crand.Text()
	if err := s.Put(ctx, key, []byte("spillway probe\n")); err != nil {
		return s.probeError(err)
	}
	if err := s.Delete(ctx, key); err != nil {
		return s.probeError(err)
	}
	return nil
}

func (s *Store) probeError(err error) error {
	e := &ProbeError{Location: s.Location(), Err: err}
	var netErr net.Error
	var urlErr *url.Error
	switch code := minio.ToErrorResponse(err).Code; {
	case code == "NoSuchBucket":
		e.Problem = fmt.Sprintf("the bucket %q does not exist at %s; create it, or fix %s", s.bucket, s.endpoint, s.settings.URI)
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "AccessDenied" ||
		code == "ExpiredToken" || code == "InvalidToken" || code == "InvalidClientTokenId":
		e.Problem = fmt.Sprintf("the store refused the credentials (%s); fix %s and %s, or the credentials of the standard chain when they are unset", code, s.settings.AccessKey, s.settings.SecretKey)
	case code == "AuthorizationHeaderMalformed" || code == "PermanentRedirect" || code == "IllegalLocationConstraintException":
		e.Problem = fmt.Sprintf("the bucket is in another region (%s); fix %s", code, s.settings.Region)
	case errors.As(err, &netErr) || errors.As(err, &urlErr) || errors.Is(err, context.DeadlineExceeded):
		e.Problem = fmt.Sprintf("cannot reach the endpoint %s; fix %s", s.endpoint, s.settings.Endpoint)
	default:
		e.Problem = fmt.Sprintf("writing and removing a probe object failed; check %s, %s and the credentials", s.settings.URI, s.settings.Endpoint)
	}
	return e
}
