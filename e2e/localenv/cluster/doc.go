// Package cluster is `make cluster` and `make cluster-down`: a REAL single-node
// Kubernetes cluster on this machine, run as root, with everything it writes
// under one directory (default _out/cluster). Nothing in it is emulated:
//
//   - etcd (Debian's etcd-server), kube-apiserver, kube-controller-manager,
//     kube-scheduler, kube-proxy (nftables mode) and the kubelet, all of
//     k8s.io/kubernetes v1.34.1 built by hack/setup.sh into bin/, each a plain
//     process (PID 1 here is not systemd) with its log under logs/;
//   - containerd 1.6 and runc 1.1 from Debian, on their own root, state and
//     socket (never the system's containerd service), the cgroupfs driver on
//     cgroup v1, the overlayfs snapshotter and restrict_oom_score_adj (root
//     here lacks CAP_SYS_RESOURCE);
//   - a pod network: Multus's thin plugin (bin/multus, hack/multus) as the
//     runtime's CNI configuration, delegating to Debian's reference bridge +
//     host-local plugins (MTU 1500) as the cluster network and to
//     NetworkAttachmentDefinitions for secondary networks. CNI configuration and
//     binaries live under the cluster directory: the host's /etc/cni and
//     /opt/cni are not touched.
//
// Certificates come from crypto/x509 and client-go's cert and keyutil helpers:
// one CA for every server and client certificate, a service-account key pair,
// and a kubeconfig per component. envtest's control plane (internal/testing/testenv)
// is not reused for this: its serving certificate names only the loopback
// address (pods reach the API server through the kubernetes Service address),
// its CAs live in the test process's memory, and its processes end with that
// process, while this cluster outlives `make cluster`.
//
// No image is pulled: the images the cluster runs (the pause image and
// Fastpath's) are built by `make images` and imported into the cluster's
// containerd. KubeVirt is NOT installed: the cluster runs pods, not VMs.
//
// Down stops everything and removes what the cluster made — containers and
// their shims, pod sandboxes (through CNI DEL), mounts, cgroups, network
// namespaces, links, nftables tables, the kernel settings the kubelet changed
// (restored) — and Leftovers lists whatever remains. Down fails naming every
// link or OVS bridge with the agent's marks left on the host since Up, or in a
// node where no agent runs (marks.go); it removes none it did not make.
package cluster
