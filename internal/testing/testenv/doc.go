// Package testenv starts the embedded local control plane every envtest suite,
// the e2e suite and `make demo` run against: a real kube-apiserver and etcd
// (built or installed into bin/ by hack/setup.sh) driven by controller-runtime's
// envtest, with the fastpath.io CRDs from config/crd/bases and fixture CRDs for
// KubeVirt (VirtualMachine, VirtualMachineInstance, KubeVirt) and Multus
// (NetworkAttachmentDefinition).
//
// The fixture CRDs are ours, not KubeVirt's or Multus's: structural, with
// status subresources where the real ones have them, and with atomic lists under
// spec.template like KubeVirt's real schema. Nothing else of KubeVirt runs: no
// virt-controller creates VMIs and no virt-handler writes their status; tests and
// the demo's emulation write those objects themselves.
//
// The controllers' suites run their operator as fastpath-operator's
// ServiceAccount (BindOperatorRoles, StartManager), so that the generated
// RBAC is tested along with the reconcilers.
package testenv
