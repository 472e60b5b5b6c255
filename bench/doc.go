// Package bench runs a benchmark matrix (docs/design.md §5) over several datapaths
// and turns the sessions into a results.Document.
//
// For every point of the matrix (test × socket size × message size ×
// sessions × pairs) and every repetition, each path is measured in turn
// (A B, then B A: the order reverses every other repetition), so slow drift
// of the machine hits every path alike and no path always runs first. Within
// one measurement all sessions of all pairs start at once; the runner sums
// them (results.NewSample) and reports the median, minimum and maximum over
// the repetitions (results.Run.Summarize).
//
// A test is run by a Tool chosen by test name: Netperf for TCP_STREAM and
// TCP_RR; VSock for VSOCK_STREAM and VSOCK_RR (bench/vsockbench, since
// netperf has no AF_VSOCK); others plug in through Runner.Tools. Where the client runs is the Executor of each
// Endpoint (bench/netperf: local, network namespace, SSH).
//
// RunConfig is one run of `fastpath-bench run` (parsed by
// bench/jobrunner): it wires the Runner and, in VM mode with vsock
// tests, provisions the guests over SSH (guest.go: the runner copies itself
// into the client and server VMs and starts vsock-server there). Before it
// measures it records each path's client interface and the offloads that
// interface negotiated (machine.go: its own interface in Pod mode;
// guestoffloads.go: the client guest's `ethtool -k` over SSH in VM mode),
// which the tuning sweep checks against what its candidate asked for.
// VSockServerOptions and VSockClientOptions are the vsock-server and
// vsock-client commands; TransportOptions select real AF_VSOCK or its
// UNIX-socket emulation.
package bench
