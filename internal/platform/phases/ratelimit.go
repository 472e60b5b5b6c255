package phases

import (
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// MaxRetryDelay caps the delay before a failed reconcile is retried. The
// controller-runtime default per-item backoff doubles from 5 ms up to 1000 s:
// after an apiserver outage in which every reconcile of an attachment failed
// a dozen times, its next retry came minutes after the apiserver was back
// (the soak's apiserver part, docs/operations.md). 30 s bounds that wait and
// still spaces out retries against an apiserver that stays down.
const MaxRetryDelay = 30 * time.Second

// RateLimiter is the reconcilers' retry pacing: per-item exponential backoff
// from 5 ms doubling up to MaxRetryDelay, and the overall 10 qps (burst 100)
// token bucket of controller-runtime's default. Set it as
// controller.Options.RateLimiter when the caller gave none.
func RateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, MaxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
