// Package relay is the vsock sibling relay run by the node agent (docs/design.md §2).
//
// Kernel vhost-vsock connects a guest only to its host (CID 2), never to
// another guest. To let VM A reach a service in VM B on the same node, the
// relay listens on the host's CID on a relay port per (attachment, service)
// route; A dials CID 2 on that port, the relay checks A's CID against the
// route's allow-list (the CIDs of the VMs the same FastPathAttachment
// selects) and forwards the stream to (B's CID, service port).
//
// The relay copies both directions with half-close propagation, enforces
// connection limits per route, per source CID, per namespace and overall
// and an idle timeout, takes live route updates without dropping established
// connections, closes a route's listener (and its connections) when the
// route goes away, exports Prometheus metrics (bytes, connections, denials,
// buffer bytes lent) and logs denials with the source CID and route, at a
// bounded rate. Its memory is bounded: an idle connection holds two small
// buffers, busy ones borrow larger buffers from one budget
// (Options.BufferBudget), and BudgetsForMemory derives the budget and the
// connection cap from the agent's memory limit. It runs over any vsock.Transport: AF_VSOCK in production, the
// UNIX-socket emulation in tests and the demo.
//
// Between two AF_UNIX ends (the emulation, a vhost-user vsock backend's host
// side) each direction moves bytes with splice(2) through a pipe, without
// copying them into the relay (splice.go); elsewhere (AF_VSOCK) it copies
// through a buffer of Options.BufferSize lent from the budget, which a busy
// direction keeps until it goes quiet, with no read deadline per read
// (bufferCopy; BenchmarkRelayCopyPath times that loop over UNIX sockets
// standing in for AF_VSOCK, docs/benchmarks.md §5). CPU profiles of the
// splice relay benchmark
// (4, 64 and 256 KiB): before the change 92 % of samples in read/write
// syscalls and the relay's copy goroutines 32 % of all; after, 20 %.
package relay
