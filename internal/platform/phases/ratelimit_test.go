package phases

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestRateLimiterCapsBackoff: after many failures of one item the delay stops
// at MaxRetryDelay instead of growing to controller-runtime's 1000 s.
func TestRateLimiterCapsBackoff(t *testing.T) {
	rl := RateLimiter()
	item := reconcile.Request{}
	first := rl.When(item)
	if first > MaxRetryDelay/100 {
		t.Fatalf("first retry after %s, want a few ms", first)
	}
	var last = first
	for range 40 {
		last = rl.When(item)
	}
	if last != MaxRetryDelay {
		t.Fatalf("retry after 41 failures waits %s, want the cap %s", last, MaxRetryDelay)
	}
	rl.Forget(item)
	if d := rl.When(item); d > MaxRetryDelay/100 {
		t.Fatalf("after Forget the retry waits %s, want a few ms again", d)
	}
}
