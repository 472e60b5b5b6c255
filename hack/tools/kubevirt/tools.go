//go:build tools

// Package tools pins KubeVirt's sidecar-shim (kubevirt.io/kubevirt/cmd/sidecars),
// the base program of the domain-hook image that `make images` builds
// (internal/localenv/images). It is its own module because KubeVirt v1.6.0 needs
// the Kubernetes v0.32.5 libraries its own go.mod replaces to (copied here), while
// hack/tools pins v0.34.1.
package tools

import _ "kubevirt.io/kubevirt/cmd/sidecars"
