package soak

import (
	"context"
	"time"
)

// RunAPIServer runs the apiserver part: like RunOperator, but instead of
// killing the operator it stops kube-apiserver for 1-4 s at random points
// of wiring and unwiring and starts it again (same address and
// certificates, etcd running throughout). The operator must finish every
// phase without a restart of its own: a phase after which the operator
// process has exited counts as lost.
func RunAPIServer(ctx context.Context, o OperatorOptions) (Summary, error) {
	r, cleanup, err := newOperatorRun(ctx, &o, "apiserver")
	if err != nil {
		return Summary{}, err
	}
	defer cleanup()
	restart := func() error {
		return r.cl.restartAPIServer(ctx, time.Second+time.Duration(r.rng.Int64N(int64(3*time.Second))))
	}
	return r.rounds(ctx, "kube-apiserver restarts", restart)
}
