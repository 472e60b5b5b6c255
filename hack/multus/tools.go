//go:build tools

// Package multus pins Multus's thin plugin (github.com/k8snetworkplumbingwg/multus-cni,
// module gopkg.in/k8snetworkplumbingwg/multus-cni.v4) for the real local cluster
// (e2e/localenv/cluster). hack/setup.sh builds cmd/multus from this module into
// bin/multus. It is a module of its own so that Multus builds with its own
// requirements, not with k8s.io/kubernetes's of hack/tools; `go install
// <pkg>@<version>` cannot be used because the module proxy refuses the version list
// it reads for deprecation notices.
package multus

import (
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
)
