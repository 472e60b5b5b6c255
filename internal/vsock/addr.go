package vsock

import (
	"errors"
	"fmt"
	"net"

	mdvsock "github.com/mdlayher/vsock"
)

// Well-known context IDs (CIDs), from include/uapi/linux/vm_sockets.h.
const (
	// HypervisorCID is VMADDR_CID_HYPERVISOR: the hypervisor process itself.
	HypervisorCID uint32 = 0
	// LocalCID is VMADDR_CID_LOCAL: loopback inside one machine.
	LocalCID uint32 = 1
	// HostCID is VMADDR_CID_HOST: the host, as seen from a guest. A guest
	// reaches the sibling relay by dialing HostCID on the relay port.
	HostCID uint32 = 2
	// MinGuestCID is the lowest CID a guest can have: 0, 1 and 2 are reserved
	// above, and KubeVirt allocates guest CIDs from 3 upwards.
	MinGuestCID uint32 = 3
	// AnyCID is VMADDR_CID_ANY (-1U); it never names a peer.
	AnyCID uint32 = 0xFFFFFFFF
)

// Network is the name vsock addresses report from net.Addr.Network.
const Network = "vsock"

// Addr is a vsock endpoint: a context ID and a port, both 32-bit as in
// struct sockaddr_vm. Connections of UnixTransport report *Addr from
// LocalAddr and RemoteAddr.
type Addr struct {
	CID  uint32
	Port uint32
}

var _ net.Addr = (*Addr)(nil)

// Network returns "vsock".
func (a *Addr) Network() string { return Network }

// String returns "<cid>:<port>", e.g. "3:5432".
func (a *Addr) String() string { return fmt.Sprintf("%d:%d", a.CID, a.Port) }

// ErrNotVsock is returned by PeerAddr for a connection whose remote address
// is not a vsock address.
var ErrNotVsock = errors.New("remote address is not a vsock address")

// PeerAddr returns the vsock address (CID and port) of the remote end of c.
// It understands connections of both transports in this package: *Addr from
// UnixTransport and *github.com/mdlayher/vsock.Addr from AFVSockTransport.
// Any other remote address yields an error wrapping ErrNotVsock.
func PeerAddr(c net.Conn) (Addr, error) {
	switch a := c.RemoteAddr().(type) {
	case *Addr:
		return *a, nil
	case *mdvsock.Addr:
		return Addr{CID: a.ContextID, Port: a.Port}, nil
	default:
		return Addr{}, fmt.Errorf("failed to get peer CID of connection from %v: %w", c.RemoteAddr(), ErrNotVsock)
	}
}

// PeerCID returns the context ID of the remote end of c; see PeerAddr.
func PeerCID(c net.Conn) (uint32, error) {
	a, err := PeerAddr(c)
	if err != nil {
		return 0, err
	}
	return a.CID, nil
}

// HalfCloser is implemented by connections that can shut down their writing
// side only (shutdown(SHUT_WR)): the peer reads EOF while data can still flow
// the other way. Connections of both transports implement it.
type HalfCloser interface {
	CloseWrite() error
}

// ErrNoHalfClose is returned by CloseWrite for a connection that does not
// implement HalfCloser.
var ErrNoHalfClose = errors.New("connection does not support half-close")

// CloseWrite shuts down the writing side of c. It returns an error wrapping
// ErrNoHalfClose when c does not implement HalfCloser.
func CloseWrite(c net.Conn) error {
	hc, ok := c.(HalfCloser)
	if !ok {
		return fmt.Errorf("failed to close the write side of connection to %v: %w", c.RemoteAddr(), ErrNoHalfClose)
	}
	if err := hc.CloseWrite(); err != nil {
		return fmt.Errorf("failed to close the write side of connection to %v: %w", c.RemoteAddr(), err)
	}
	return nil
}
