// Package phases is the phase loop of the reconciler skeleton that the three
// reconcilers share (controllers/attachment, controllers/benchmark,
// controllers/nodeagent; cluster-api's shape): each Reconcile builds a scope, runs
// a []Phase over it with Run and patches status once from what the phases
// recorded. RateLimiter is their shared retry pacing (exponential backoff
// capped at MaxRetryDelay).
//
// It is under 100 lines and stands alone on purpose: it is the one
// implementation of that loop, imported by three packages that must not
// import each other.
package phases
