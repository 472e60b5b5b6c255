// Package topology builds network-namespace building blocks on one Linux host:
// named network namespaces that stand in for KubeVirt virt-launcher pods, and
// a default pod-network interface shaped like KubeVirt's masquerade binding.
// The demo's emulation (e2e/localenv/emulation), the e2e suite and the local node
// benchmark (the baseline-masquerade path of docs/design.md §5.2) share it.
//
// The masquerade shape (AddMasquerade) of one endpoint, KubeVirt's default
// pod network binding, with a launcher and a guest namespace:
//
//	host netns            launcher netns ("virt-launcher pod")      guest netns
//	----------            ------------------------------------      -----------
//	<hostIf> (veth) <---> eth0 (veth), pod IP /32
//	route <pod IP>/32     default via 169.254.1.1 dev eth0
//	forwarding=1 on       nftables table ip nat: KubeVirt's rules
//	<hostIf> only         ip_forward=1
//	                      k6t-eth0 (bridge) 10.0.2.1/24, TX csum off
//	                      tap0 (veth, port of k6t-eth0) <---------> eth0 10.0.2.2/24
//	                                                                 default via 10.0.2.1
//
// The bridge binding (AddBridgeBinding) of a pod interface a CNI plugin made
// in the launcher, KubeVirt's `bridge: {}`: the pod interface becomes a port
// of k6t-<hash> (TX csum off, learning off on the port), and a veth tap<hash>
// connects the guest interface, which takes over the pod interface's MAC,
// MTU and addresses.
//
// What is real and what is shaped: the veths, host routes, per-link
// forwarding, bridges, offload settings and the nftables NAT are real kernel
// objects doing real work. Traffic between two masquerade endpoints leaves
// one guest, is NATed (masquerade of 10.0.2.2 to the pod IP) and routed in
// its launcher, routed by the host between two veths (Calico-style: a /32
// per pod and the link-local gateway 169.254.1.1 answered by the host's veth
// through a permanent neighbour entry), DNATed to 10.0.2.2 in the other
// launcher and leaves k6t-eth0 towards the guest, checksummed and segmented
// in software because virt-launcher turns TX checksum offload off on its
// in-pod bridges. The NAT rules are virt-launcher's
// (pkg/network/setup/netpod/masquerade: chains prerouting, input, output,
// postrouting, KUBEVIRT_PREINBOUND and KUBEVIRT_POSTINBOUND). The EMULATED
// part: KubeVirt's tap devices lead to QEMU and a virtio NIC; here a veth
// leads to the guest namespace's own stack.
//
// AddMasquerade without a guest namespace collapses launcher and guest into
// one namespace (10.0.2.2 local on k6t-eth0); nothing then crosses
// k6t-eth0, which makes an optimistic baseline.
//
// Nothing here changes host-wide settings: forwarding is enabled only on the
// host ends of our veths (net.ipv4.conf.<link>.forwarding, which the kernel
// checks on the receiving link), and everything goes away with the veth and
// the namespace.
package topology
