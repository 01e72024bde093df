package plan

import (
	"context"
	"fmt"
	"time"

	"github.com/spillway/spillway/spill"
)

// The remote tier's sweep, for the process that speaks for the application (the Spark driver).
// Each call builds its own store from the settings and probes nothing: it neither needs nor
// changes the registry's tier, so in Spark's local mode, where the driver and the executor are
// one process, the driver's calls leave the executor's tier as it is.

// RemoteSweepTimeout bounds one sweep or removal, every call it makes to the store included;
// each call is bounded on its own by the client's retries. What a sweep cut short leaves, the
// next one (or the bucket's lifecycle rule) takes.
const RemoteSweepTimeout = 10 * time.Minute

// MarkRemoteApplication marks s.Application alive in the store (spill.MarkApplication). The
// driver calls it more often than the sweeps' age, so that no sweep takes its prefix.
func MarkRemoteApplication(s RemoteSettings) error {
	store, err := newRemoteStore(s, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), spill.RemoteCallTimeout)
	defer cancel()
	_, err = spill.MarkApplication(ctx, store, spill.ApplicationName(s.Application))
	return err
}

// SweepRemote marks s.Application alive, then removes every other application's prefix whose
// newest object is older than olderThan by the store's clock (spill.SweepApplications): what
// killed applications left.
func SweepRemote(s RemoteSettings, olderThan time.Duration) (spill.SweepResult, error) {
	if olderThan <= 0 {
		return spill.SweepResult{}, &ArgumentError{Reason: fmt.Sprintf("the remote sweep's age is %v; give a positive duration", olderThan)}
	}
	store, err := newRemoteStore(s, nil)
	if err != nil {
		return spill.SweepResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), RemoteSweepTimeout)
	defer cancel()
	return spill.SweepApplications(ctx, store, spill.ApplicationName(s.Application), olderThan)
}

// RemoveRemoteApplication deletes every object of s.Application's prefix and aborts its uploads
// (spill.RemoveApplication): the driver's last call, at the application's end.
func RemoveRemoteApplication(s RemoteSettings) (spill.SweepResult, error) {
	store, err := newRemoteStore(s, nil)
	if err != nil {
		return spill.SweepResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), RemoteSweepTimeout)
	defer cancel()
	return spill.RemoveApplication(ctx, store, spill.ApplicationName(s.Application))
}
