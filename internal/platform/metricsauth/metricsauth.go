package metricsauth

import (
	"crypto/tls"
	"flag"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The reviews the filter sends to the API server; controller-gen adds these
// rules to both roles (the Makefile passes this package to each).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Flags are the metrics endpoint's command-line flags.
type Flags struct {
	// BindAddress is host:port of the endpoint; "0" disables it.
	BindAddress string
	// Secure serves HTTPS with authentication and authorization; false serves
	// plain HTTP to anyone who can connect.
	Secure bool
	// CertDir holds tls.crt and tls.key; empty means a self-signed
	// certificate generated at start (scrapers then skip verification).
	CertDir string
}

// Register adds --metrics-bind-address (default defaultAddr),
// --metrics-secure (default true) and --metrics-cert-dir to fs; what says
// which metrics the endpoint serves, for the help text.
func (f *Flags) Register(fs *flag.FlagSet, defaultAddr, what string) {
	fs.StringVar(&f.BindAddress, "metrics-bind-address", defaultAddr, "Address of the Prometheus metrics endpoint ("+what+"); \"0\" disables it.")
	fs.BoolVar(&f.Secure, "metrics-secure", true, "Serve metrics over HTTPS to callers the API server authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview); false serves plain HTTP to anyone.")
	fs.StringVar(&f.CertDir, "metrics-cert-dir", "", "Directory with tls.crt and tls.key for the metrics endpoint; empty: a self-signed certificate generated at start.")
}

// ServerOptions returns the manager's metrics server options for f.
func (f Flags) ServerOptions() metricsserver.Options {
	o := metricsserver.Options{BindAddress: f.BindAddress}
	if f.Secure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.CertDir = f.CertDir
		// HTTP/1.1 only: HTTP/2 rapid reset (CVE-2023-44487) and stream
		// cancellation (CVE-2023-39325) need no credentials to exhaust a
		// server, and a scrape gains nothing from HTTP/2 (kubebuilder's
		// scaffold does the same).
		o.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	return o
}
