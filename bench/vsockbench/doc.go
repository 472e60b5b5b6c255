// Package vsockbench measures vsock stream throughput (VSOCK_STREAM) and
// request/response latency (VSOCK_RR) over any vsock.Transport, because
// netperf has no AF_VSOCK support. The benchmark runner (`fastpath-bench
// vsock-server` / `vsock-client`) wires these functions to flags; the relay
// benchmark uses them over the UNIX-socket emulation.
//
// The tests follow netperf's TCP_STREAM and TCP_RR: STREAM sends messages of
// a fixed size for a duration and reports what the receiver counted as Mbps
// (10^6 bit/s); RR runs back-to-back 1-byte request / 1-byte response
// transactions and reports transactions per second and the mean and 99th
// percentile latency in microseconds.
//
// Wire protocol (one connection per test): the client first sends the
// 6-byte header "FPVB" 0x01 <test>, where <test> is 'S' (STREAM) or 'R'
// (RR). STREAM: the client sends payload until the duration ends and
// half-closes; the server discards and counts it, and at EOF answers with
// the count as an 8-byte big-endian unsigned integer. RR: the client writes
// one byte, the server answers one byte, repeated until the client closes.
package vsockbench
