//go:build tools

// Package tools pins KubeVirt (v1.7.0; docs/kubevirt.md says why not v1.9.0):
// the programs `hack/setup.sh kubevirt` builds into bin/kubevirt/<version>/ for
// the images of e2e/localenv/images, among them the sidecar-shim
// (kubevirt.io/kubevirt/cmd/sidecars), the base program of the domain-hook
// image. It is its own module because KubeVirt's go.mod replaces (copied here)
// are not ours: k8s.io v0.33.5, old openshift/api and OLM, and kubevirt.io/api
// and client-go from its staging tree (here their published releases).
package tools

import (
	_ "kubevirt.io/kubevirt/cmd/sidecars"
	_ "kubevirt.io/kubevirt/cmd/virt-api"
	_ "kubevirt.io/kubevirt/cmd/virt-chroot"
	_ "kubevirt.io/kubevirt/cmd/virt-controller"
	_ "kubevirt.io/kubevirt/cmd/virt-freezer"
	_ "kubevirt.io/kubevirt/cmd/virt-handler"
	_ "kubevirt.io/kubevirt/cmd/virt-launcher"
	_ "kubevirt.io/kubevirt/cmd/virt-launcher-monitor"
	_ "kubevirt.io/kubevirt/cmd/virt-operator"
	_ "kubevirt.io/kubevirt/cmd/virt-probe"
	_ "kubevirt.io/kubevirt/cmd/virt-tail"
	_ "kubevirt.io/kubevirt/cmd/virtctl"
	_ "kubevirt.io/kubevirt/tools/manifest-templator"
	_ "kubevirt.io/kubevirt/tools/resource-generator"
)
