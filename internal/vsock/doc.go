// Package vsock is the transport under the sibling relay and the vsock
// benchmark: a small Transport interface (listen on a port of this host's or
// guest's own CID, dial a CID and port, learn the peer CID of an accepted
// connection) with two implementations.
//
//   - AFVSockTransport uses real AF_VSOCK sockets through
//     github.com/mdlayher/vsock. It is what the node agent uses in production.
//     Never use it on a development machine: there /dev/vsock is the machine's
//     own channel to its hypervisor.
//   - UnixTransport is an EMULATION of AF_VSOCK over UNIX stream sockets, for
//     tests and the demo. Each CID is a directory of sockets,
//     <root>/<cid>/<port>.sock, in the spirit of Firecracker's hybrid vsock; a
//     short text preamble carries the dialer's CID so that an accepted
//     connection knows its peer CID (see UnixTransport).
//
// Connections returned by both transports report Addr-like vsock addresses
// (CID and port) from LocalAddr and RemoteAddr, and support half-close through
// CloseWrite (see the package function CloseWrite).
package vsock
