// Package relay is the vsock sibling relay run by the node agent (docs/design.md §2).
//
// Kernel vhost-vsock connects a guest only to its host (CID 2), never to
// another guest. To let VM A reach a service in VM B on the same node, the
// relay listens on the host's CID on a relay port per (attachment, service)
// route; A dials CID 2 on that port, the relay checks A's CID against the
// route's allow-list (the CIDs of the VMs the same FastPathAttachment
// selects) and forwards the stream to (B's CID, service port).
//
// The relay copies both directions with half-close propagation, enforces a
// connection limit per route and an idle timeout, takes live route updates
// without dropping established connections, closes a route's listener (and
// its connections) when the route goes away, exports Prometheus metrics
// (bytes, connections, denials) and logs every denial with the source CID and
// route. It runs over any vsock.Transport: AF_VSOCK in production, the
// UNIX-socket emulation in tests and the demo.
//
// Between two AF_UNIX ends (the emulation, a vhost-user vsock backend's host
// side) each direction moves bytes with splice(2) through a pipe, without
// copying them into the relay (splice.go); elsewhere it copies through a
// pooled buffer of Options.BufferSize. CPU profiles of the relay benchmark
// (4, 64 and 256 KiB): before the change 92 % of samples in read/write
// syscalls and the relay's copy goroutines 32 % of all; after, 20 %.
package relay
