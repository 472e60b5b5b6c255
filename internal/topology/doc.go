// Package topology builds network-namespace building blocks on one Linux host:
// named network namespaces that stand in for KubeVirt virt-launcher pods, and
// a default pod-network interface shaped like KubeVirt's masquerade binding.
// The demo's emulation (internal/emulation), the e2e suite and the local node
// benchmark (the baseline-masquerade path of DESIGN §5.2) share it.
//
// The masquerade shape (AddMasquerade), per endpoint namespace:
//
//	host netns                       endpoint netns (the "virt-launcher pod")
//	----------                       ----------------------------------------
//	<hostIf> (veth, MTU 1500) <----> eth0 (veth, MTU 1500), pod IP /32
//	route <pod IP>/32 dev <hostIf>   default via 169.254.1.1 dev eth0 src 10.0.2.2
//	forwarding=1 on <hostIf> only    k6t-eth0 (bridge): 10.0.2.1/24 and 10.0.2.2/24
//	                                 nftables table ip nat: KubeVirt's masquerade rules
//
// What is real and what is shaped: the veth, the host routes, the per-link
// forwarding and the nftables NAT are real kernel objects doing real work:
// traffic between two such endpoints leaves one namespace through its NAT
// (masquerade of 10.0.2.2 to the pod IP), is routed by the host between two
// veths, and enters the other namespace through its NAT (DNAT of the pod IP to
// 10.0.2.2), as between two KubeVirt masquerade VMs on one node whose cluster
// CNI routes pod IPs through the host (Calico-style: a /32 per pod and the
// link-local gateway 169.254.1.1 answered by the host's veth). The rules are
// those of KubeVirt's virt-launcher (pkg/network/setup/netpod/masquerade:
// chains prerouting, input, output, postrouting, KUBEVIRT_PREINBOUND and
// KUBEVIRT_POSTINBOUND). The EMULATED part: in KubeVirt the guest address
// 10.0.2.2 lives in the guest behind a tap device on k6t-eth0; here the
// namespace itself plays the guest, so 10.0.2.2 is a local address on
// k6t-eth0 and the default route prefers it as source address, which sends
// every connection the "guest" opens through the masquerade rule.
//
// Nothing here changes host-wide settings: forwarding is enabled only on the
// host ends of our veths (net.ipv4.conf.<link>.forwarding, which the kernel
// checks on the receiving link), and everything goes away with the veth and
// the namespace.
package topology
