// Package benchfig records the figures that `make bench` collects from the
// project's Go benchmarks (CNI ADD/DEL latency, relay copy cost, operator
// scale) so that the local node benchmark can print them beside its own
// netperf ratios.
//
// A figures file is JSON at $FASTPATH_BENCH_DIR/<benchmark>.json:
//
//	{"benchmark": "cni-latency", "description": "...",
//	 "figures": [{"name": "LinuxBridge ADD p50 (1 concurrent)", "value": 12.3, "unit": "ms"}]}
//
// Why a package of its own (under 100 lines): the Go benchmarks that write
// figures live in low-level packages (the CNI plugin's cni/cmd/fastpath, the
// vsock relay, the attachment controller). This package imports only the
// standard library, so their test binaries do not link bench, whose
// runner brings the Kubernetes client, netperf and vsock tooling.
package benchfig
