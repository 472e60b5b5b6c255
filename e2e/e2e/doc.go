// Package e2e is Fastpath's end-to-end suite (Ginkgo): the whole story of
// issue 7 asserted on a running system — manifests applied, the operator
// reconciling, interfaces wired by the CNI binary, vsock through the relay,
// benchmark results in status, and the VM templates restored byte for byte.
//
// Two environments run the same specs:
//
//   - local (default, root): the Stack of e2e/localenv/demo — the embedded
//     control plane, the real fastpath-operator and fastpath-agent processes
//     from bin/, and the EMULATED KubeVirt, Multus and kubelet of
//     e2e/localenv/emulation. Guests are network namespaces, so "in the guest"
//     means inside that namespace, and vsock is the UNIX-socket transport.
//     FASTPATH_BIN_DIR overrides bin/ (the binaries `make build` makes).
//
//   - cluster (KUBECONFIG set): a real cluster with KubeVirt (the VSOCK
//     feature gate; not Sidecar) and Fastpath's binding plugins registered, Multus and Fastpath installed (make e2e-cluster
//     KUBEVIRT=1 makes one on this machine: docs/kubevirt.md). Guest
//     commands run through `virtctl ssh`, so virtctl must be on PATH; the VMs'
//     cloud-init installs netperf, socat and ethtool.
//
//   - cluster without KubeVirt (make e2e-cluster: the real single-node cluster
//     of e2e/localenv/cluster): the VM specs are skipped, each saying that
//     it did not run and why (Ginkgo reports them as skipped, never as
//     passed), and the Pod-mode FastPathBenchmark runs on real pods.
//
// The Pod-mode specs need a real kubelet and are skipped on the local stack
// with the reason; any other spec that cannot run in an environment fails
// with the reason.
package e2e
