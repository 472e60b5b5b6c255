// Package metricsauth holds the metrics endpoint flags of fastpath-operator
// and fastpath-agent. By default the endpoint serves HTTPS and admits only
// callers that the API server authenticates (TokenReview of the bearer
// token) and authorizes for GET on the non-resource URL /metrics
// (SubjectAccessReview), through controller-runtime's
// filters.WithAuthenticationAndAuthorization, as kubebuilder's scaffold
// does. The agent runs on the host network, so without this any process
// that reaches a node could read its relay metrics.
//
// Prometheus needs a ClusterRole with nonResourceURLs ["/metrics"] and verb
// get (the chart's fastpath-metrics-reader) bound to its ServiceAccount.
//
// Why a package of its own (under 100 lines): controller-gen reads the
// +kubebuilder:rbac markers of the TokenReview and SubjectAccessReview rules
// the filter needs from this package, and the Makefile passes it to the RBAC
// generation of both roles (fastpath-operator and fastpath-agent). Kept apart,
// both roles get exactly these two rules from one place; inside either
// binary's controller package only one role would get them, and inside a
// package with other markers both roles would get those too.
package metricsauth
