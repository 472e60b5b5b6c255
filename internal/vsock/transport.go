package vsock

import (
	"context"
	"net"
)

// Transport opens vsock-like stream connections. Implementations:
// AFVSockTransport (real AF_VSOCK) and UnixTransport (an emulation over UNIX
// sockets for tests and the demo).
type Transport interface {
	// Listen listens for stream connections on port of this machine's own
	// CID (the host's CID 2 for the node agent, the guest's CID inside a
	// VM). Accepted connections report the peer's vsock address from
	// RemoteAddr, readable with PeerAddr / PeerCID.
	Listen(port uint32) (net.Listener, error)
	// Dial connects to port on the machine with context ID cid. ctx bounds
	// the connection setup only, not the life of the returned connection.
	Dial(ctx context.Context, cid, port uint32) (net.Conn, error)
}

// Emulation is implemented by a Transport that stands in for the kernel's
// AF_VSOCK (UnixTransport), so that what runs over it (a relay's status, a
// benchmark's results) can say it was not real vsock.
type Emulation interface {
	// EmulationNote says what stands in for AF_VSOCK, e.g. "vsock emulated
	// over UNIX sockets under /run/x (this end is CID 2)".
	EmulationNote() string
}

// EmulationNote is t's EmulationNote when t is an Emulation, else "": t is
// the kernel's AF_VSOCK (or nil).
func EmulationNote(t Transport) string {
	if e, ok := t.(Emulation); ok {
		return e.EmulationNote()
	}
	return ""
}
