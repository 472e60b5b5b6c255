// Package benchfig records the figures that `make bench` collects from the
// project's Go benchmarks (CNI ADD/DEL latency, relay copy cost, operator
// scale) so that the local node benchmark can print them beside its own
// netperf ratios.
//
// A figures file is JSON at $FASTPATH_BENCH_DIR/<benchmark>.json:
//
//	{"benchmark": "cni-latency", "description": "...",
//	 "figures": [{"name": "LinuxBridge ADD p50 (1 concurrent)", "value": 12.3, "unit": "ms"}]}
package benchfig
