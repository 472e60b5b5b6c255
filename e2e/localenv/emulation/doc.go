// Package emulation stands in for KubeVirt, Multus, the kubelet and the Job
// controller on one Linux host, so that Fastpath's real operator, node agent,
// CNI plugin and benchmark runner can do their whole job against the embedded
// control plane (internal/testing/testenv) without a cluster: `make demo` and the e2e
// suite use it. Every line it prints starts with EMULATED.
//
// What is REAL:
//   - the API server and etcd, and every object in them: the samples are
//     applied with kubectl; the operator, the agent and the benchmark
//     controller read and write them as on a cluster;
//   - the fast-path interface of each VM: the emulation executes the real
//     `fastpath` CNI binary (from the directory the node agent installed it
//     into) with CNI_COMMAND=ADD/DEL, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME =
//     KubeVirt's hashed pod interface name (PodInterfaceName), CNI_PATH, the
//     CNI_ARGS Multus sets (K8S_POD_NAMESPACE, K8S_POD_NAME, ...), and the
//     netconf read from the NetworkAttachmentDefinition's spec.config in the
//     API server, through libcni, which injects the runtimeConfig of the
//     capabilities the netconf declares exactly as Multus does through it;
//   - the kernel datapath: network namespaces, veths, the node bridge the
//     agent made, host-local IPAM, MTU and offloads, and KubeVirt's masquerade
//     NAT rules (bench/topology) on the default pod network;
//   - netserver and netperf, and the benchmark runner binary;
//   - the vsock relay of the node agent, over the UNIX-socket transport.
//
// What is EMULATED:
//   - virt-controller: a VM whose runStrategy is Always (or RerunOnFailure, or
//     running: true) gets a VMI created from its template (labels, annotations,
//     spec as they are, owned by the VM); the VM status says Running/Stopped;
//   - a vsock mode Sibling VMI with real guests also gets a virt-launcher Pod
//     object bound to this node (no kubelet runs it), as the scheduler would
//     bind it, because the node agent starts a Sibling group's backend once a
//     member's launcher pod is on its node;
//   - the virt-launcher pod and the guest are two network namespaces,
//     <Prefix><namespace>.virt-launcher-<vm>-<hash> and <Prefix><namespace>.<vm>
//     (see `ip netns`). The CNI plugin wires the launcher's; virt-launcher's
//     bindings are rebuilt with bench/topology: masquerade for the pod
//     network (k6t-eth0, NAT, tap0) and bridge for Multus networks
//     (k6t-<hash> with the pod interface as a port, tap<hash>), both bridges
//     with TX checksum offload off as KubeVirt sets them. A veth stands in for
//     each tap device, and the guest namespace's own stack for QEMU, virtio
//     and the guest OS: its NICs are named eth0, eth1, ... in spec order and
//     the bridge-bound ones get the pod interface's MAC, MTU and addresses
//     (KubeVirt's DHCP server hands those to a real guest);
//   - the cluster pod network: a veth from the host into the launcher with a
//     /32 pod IP from Options.PodCIDR, routed through the host (a Calico-like
//     CNI without overlay);
//   - virt-handler: the VMI status (phase Running, nodeName, interfaces with
//     name, interfaceName, podInterfaceName, ipAddress(es), mac, infoSource,
//     VSOCKCID when autoattachVSOCK is set, a Ready condition) is written from
//     the launcher's real interfaces;
//   - vsock: a guest CID (from 3) is an identity on the UNIX-socket transport
//     of internal/vsock (each CID a directory of sockets under
//     Options.VSOCKRoot); Emulator.VSOCK gives a guest's transport to play guest
//     services and clients. No AF_VSOCK socket is ever opened;
//   - cloud-init: runcmd entries that start netserver start it inside the
//     guest namespace (in the foreground); other entries are reported and
//     skipped; packages are the host's; SSH public keys of accessCredentials
//     Secrets are "authorised in the guest" (a file the emulated ssh checks);
//   - the kubelet and Job controller for Jobs: a Job's single container runs as
//     a local process (its command resolved through Options.Binaries) in the
//     host network namespace, with Secret/ConfigMap/emptyDir volumes written to
//     a directory and the mount paths in its arguments rewritten, a kubeconfig
//     holding a real token of the pod's ServiceAccount (TokenRequest, so RBAC is
//     enforced as on a cluster), and the Job status written on exit;
//   - ssh: runners reach VM guests over SSH on a cluster; here an `ssh` script
//     first on the runner's PATH checks the identity against the guest's
//     authorised keys and runs the remote command inside the guest's network
//     namespace (ip netns exec), so netperf runs "in the client VM";
//   - the user: with Options.RestartWhenRequired, a VM that an attachment
//     reports as restartRequired gets an emulated `virtctl restart` (its VMI is
//     deleted and created again from the wired template).
//
// With Options.Guests "qemu" the guests are REAL VMs instead of network
// namespaces (e2e/localenv/guests): the launcher keeps the pod network,
// the Multus networks and KubeVirt's in-pod bridges, and each VMI's domain,
// rendered as KubeVirt's converter does and passed through the real domain
// hook, is defined and started by a libvirtd in the launcher namespace; DHCP
// on the taps hands the guest its addresses; the guest's vsock is
// vhost-device-vsock on the relay's directory. cloud-init is not run (the
// guest image starts netserver) and the emulated ssh does not reach real
// guests. Lines about real guests start with REAL.
//
// Nothing else of KubeVirt exists: no domain, no domain hook, no virtio queue
// or ring sizes, no live migration. Stop removes every namespace, veth and
// process the emulation made; CleanupLeftovers removes them after a killed run.
package emulation
