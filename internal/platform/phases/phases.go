package phases

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Phase is one step of a reconcile over the scope S that the reconciler
// builds for one object: it records what it found in the scope (and the
// object's status) and returns a requeue request, or an error that ends the
// reconcile after it.
type Phase[S any] func(context.Context, S) (ctrl.Result, error)

// Stopper is a scope that a phase can mark as done: no phase after it runs,
// and the reconcile ends without an error (e.g. the spec is invalid, or the
// benchmark has finished).
type Stopper interface {
	Stopped() bool
}

// Run runs phases in order until one returns an error (returned as is) or
// marks s stopped, and returns the soonest RequeueAfter any of them asked
// for (zero when none did).
func Run[S Stopper](ctx context.Context, s S, phases ...Phase[S]) (ctrl.Result, error) {
	var res ctrl.Result
	for _, p := range phases {
		r, err := p(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		if r.RequeueAfter > 0 && (res.RequeueAfter == 0 || r.RequeueAfter < res.RequeueAfter) {
			res = r
		}
		if s.Stopped() {
			break
		}
	}
	return res, nil
}
