// Package results defines the JSON document that fastpath-bench prints and
// that the FastPathBenchmark controller, the local node benchmark and the
// report renderer exchange:
//
//	{"machine": {...}, "runs": [{"path", "test", "socketBytes", "messageBytes",
//	  "sessions", "mtu", "throughputMbps", "meanLatencyUs", "p99LatencyUs",
//	  "samples": [...]}]}
//
// The field names of Document, Machine and Run are a public contract
// (issue 6, docs/design.md §5); add fields freely, rename none. Units are part of the
// names: Mbps is 10^6 bit/s, Us is microseconds, Bytes is bytes.
//
// The package has no dependencies beyond the standard library so that the
// operator, the runner and the CLI can all import it.
package results
