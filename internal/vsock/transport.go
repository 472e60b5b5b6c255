package vsock

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
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

// ParseTransport turns the value of a --vsock-transport flag (the node
// agent's and the vsock backend's) into the host's transport: "vsock" is
// AF_VSOCK on the host CID (AFVSockTransport, its receive buffer bufferSize
// bytes, 0 the kernel's); "unix:<dir>" is the UNIX-socket EMULATION rooted
// at dir (UnixTransport of HostCID), returned as emulatedRoot (absolute).
// Errors name the flag and the values it accepts.
func ParseTransport(s string, bufferSize uint64) (t Transport, emulatedRoot string, err error) {
	switch {
	case s == "vsock":
		return AFVSockTransport{BufferSize: bufferSize}, "", nil
	case strings.HasPrefix(s, "unix:") && len(s) > len("unix:"):
		root, err := filepath.Abs(strings.TrimPrefix(s, "unix:"))
		if err != nil {
			return nil, "", fmt.Errorf("failed to resolve --vsock-transport directory %s: %w", s, err)
		}
		return NewUnixTransport(root, HostCID), root, nil
	default:
		return nil, "", fmt.Errorf("--vsock-transport %q must be \"vsock\" or \"unix:<dir>\"", s)
	}
}
