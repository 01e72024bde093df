package s3store

import (
	"net/http"

	"github.com/minio/minio-go/v7"
)

// retriedStatus are the HTTP statuses the client retries (with its backoff, up to MaxRetries):
// throttling (429, 503 SlowDown) and the server's or a gateway's errors.
var retriedStatus = map[int]bool{
	http.StatusRequestTimeout: true, http.StatusTooManyRequests: true, 499: true,
	http.StatusInternalServerError: true, http.StatusBadGateway: true,
	http.StatusServiceUnavailable: true, http.StatusGatewayTimeout: true, 520: true,
}

// countingTransport is the client's transport with a call of onRetry for each answer the client
// retries, for the remote tier's retry counter: the client itself reports none.
type countingTransport struct {
	base    http.RoundTripper
	onRetry func()
}

// newTransport is the client's default transport, counting retried answers when onRetry is set.
func newTransport(secure bool, onRetry func()) (http.RoundTripper, error) {
	base, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	if onRetry == nil {
		return base, nil
	}
	return &countingTransport{base: base, onRetry: onRetry}, nil
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	switch {
	case err != nil:
		if req.Context().Err() == nil { // a request cut by its own call's bound is not retried
			t.onRetry()
		}
	case retriedStatus[resp.StatusCode]:
		t.onRetry()
	}
	return resp, err
}
