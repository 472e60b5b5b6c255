// Package localbench builds the datapaths of the local node benchmark
// (docs/design.md §5.2, issue 6) between network namespaces on this machine, so
// that bench can measure them with netperf, alternating paths
// point by point:
//
//	baseline-untuned       veth -> Linux bridge -> veth, MTU 1500, every offload off (TSO, GSO, GRO, checksums)
//	baseline-masquerade    KubeVirt's default shape (bench/topology): MTU 1500, NAT in each
//	                       endpoint's namespace, routed through the host
//	fastpath-linux-bridge  wired by EXECUTING the fastpath CNI binary through libcni (ADD/DEL,
//	                       host-local IPAM) on a Linux bridge, at each fast-path MTU (9000, 65520),
//	                       offloads on
//	fastpath-ovs           the same on an Open vSwitch bridge with the USERSPACE datapath
//	                       (datapath_type=netdev): this machine has no openvswitch kernel
//	                       module, while a real node uses the kernel datapath
//	fastpath-macvtap       a macvlan in bridge mode in each namespace on one node-local lower
//	                       device (one end of a host veth pair), at each fast-path MTU,
//	                       offloads on; wired by the benchmark (macvlan stands in for
//	                       macvtap: same forwarding, no tap queue; see buildMacvtap)
//	ceiling                at each fast-path MTU, per repetition the better of two candidates
//	                       measured like every path: ceiling-veth, one veth pair between two
//	                       namespaces, and ceiling-loopback, TCP over lo inside one namespace
//	                       (lo at the same MTU), offloads on as on the fast paths (CeilingOf):
//	                       the best a kernel path does here, compared with each fast path at
//	                       the same MTU
//
// netperf and netserver's test process are pinned alike on every path
// (Tools, netperf -T; DefaultCPUs puts both on CPU 0).
//
// Targets (CheckTargets) are medians of paired per-repetition ratios: the
// runner alternates paths inside each repetition, so repetition i of a path
// and of its reference ran back to back under the same machine load.
//
// Every path has its own client and server namespace (EMULATED VMs: the
// namespace plays the guest; there is no virtio-net, vhost or QEMU), a
// netserver in the server namespace and netperf run in the client
// namespace (netperf.NetNS).
//
// Everything Build makes is named after the run: "<prefix><id>", e.g.
// fpbl3fa9c1 (Options.Prefix and six random hex digits). Namespaces are
// /run/netns/<prefix><id>-..., host links and bridges <prefix><id><role>,
// temporary files os.TempDir()/<prefix><id>-*. Setup.Close removes all of
// it (netservers, CNI DEL, bridges, namespaces, files, and Open vSwitch if
// this run started it), also after a cancelled run. A run holds an flock on
// /run/fastpath-bench-local/<prefix><id>.lock while it lives, so
// CleanLeftovers removes what killed runs left behind without touching a
// run that is still going.
//
// RunOptions is `fastpath-bench local`: build, measure, write results.json
// and the report, print the medians, ratios, targets and other benchmarks'
// figures (command.go, output.go). Outcome (gate.go) turns the target lines
// into the CI gate's exit code (bench/gate's codes: 0 met, 1 a target
// missed, 2 could not run; a target not measurable here counts neither
// way) and JUnit XML (--junit-file).
package localbench
