package apiprobe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// ErrAppeared is returned by the runnable of RestartWhenServed when the API
// it waits for is served: the manager stops and the process should exit 0,
// so that its restart sets up the watches of the new API.
var ErrAppeared = errors.New("an API the process waits for is now served: restarting to watch it")

// Served reports whether the API server serves every one of resources (plural
// names, e.g. "virtualmachines") in groupVersion (e.g. "kubevirt.io/v1").
// A group version the server does not know is (false, nil); other discovery
// errors are returned.
func Served(d discovery.DiscoveryInterface, groupVersion string, resources ...string) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to discover %s: %w", groupVersion, err)
	}
	for _, want := range resources {
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
			return false, nil
		}
	}
	return true, nil
}

// RestartWhenServed returns a runnable that asks every interval whether the
// API is served and returns ErrAppeared when it is (discovery errors are
// retried). It runs on every replica, leader or not.
func RestartWhenServed(d discovery.DiscoveryInterface, interval time.Duration, groupVersion string, resources ...string) manager.Runnable {
	return runnable(func(ctx context.Context) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				if ok, err := Served(d, groupVersion, resources...); err == nil && ok {
					return fmt.Errorf("%w (%s)", ErrAppeared, groupVersion)
				}
			}
		}
	})
}

// runnable is a manager.Runnable that needs no leader election.
type runnable func(context.Context) error

func (f runnable) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection is false: a standby replica must restart too.
func (runnable) NeedLeaderElection() bool { return false }
