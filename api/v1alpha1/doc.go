// Package v1alpha1 is the fastpath.io/v1alpha1 API: FastPathAttachment
// (declares fast-path network and vsock attachments for a set of KubeVirt
// VirtualMachines), FastPathBenchmark (proves the gain with netperf) and
// FastPathNode (what a node can do, written by the node agent).
//
// The field names are the public contract of docs/design.md §3.1. Defaults are
// applied in code by the Default* functions in defaults.go, which the
// controllers, the CNI netconf rendering and the domain-hook tuning all use,
// so a manifest stays as the user wrote it.
//
// +kubebuilder:object:generate=true
// +groupName=fastpath.io
package v1alpha1
