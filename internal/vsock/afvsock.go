package vsock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	mdvsock "github.com/mdlayher/vsock"
	"golang.org/x/sys/unix"
)

// AFVSockTransport is the production Transport: real AF_VSOCK sockets through
// github.com/mdlayher/vsock. Accepted connections report *mdvsock.Addr from
// RemoteAddr (read it with PeerAddr / PeerCID); connections are
// *mdvsock.Conn, which supports CloseWrite.
//
// Never use it on a development machine or in tests: /dev/vsock there is the
// machine's own channel to its hypervisor. Tests use UnixTransport.
type AFVSockTransport struct {
	// BufferSize, when not 0, is the receive buffer of every connection the
	// transport accepts or dials, bytes: SO_VM_SOCKETS_BUFFER_SIZE, the
	// window the peer's send credit is counted against. The kernel's
	// default and cap are 256 KiB (VSOCK_DEFAULT_BUFFER_SIZE and
	// VSOCK_DEFAULT_BUFFER_MAX_SIZE, net/vmw_vsock/af_vsock.c), so a peer
	// streaming virtio-vsock's largest packets (64 KiB) has four in flight
	// before it waits for a credit update;
	// the transport raises SO_VM_SOCKETS_BUFFER_MAX_SIZE to BufferSize first,
	// and the kernel tells the peer the new window with a credit update
	// (virtio_transport_notify_buffer_size). It is also what the kernel may
	// queue for the connection when the reader stops reading. A connection
	// whose size cannot be set keeps the kernel's. 0 keeps the kernel's
	// default.
	BufferSize uint64
}

var _ Transport = AFVSockTransport{}

// Listen listens on port of this machine's own CID (mdvsock.Listen asks the
// kernel with IOCTL_VM_SOCKETS_GET_LOCAL_CID; on a KVM host that is HostCID).
func (t AFVSockTransport) Listen(port uint32) (net.Listener, error) {
	l, err := mdvsock.Listen(port, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on vsock port %d: %w", port, err)
	}
	if t.BufferSize == 0 {
		return l, nil
	}
	return sizedListener{Listener: l, size: t.BufferSize}, nil
}

// sizedListener sets the receive buffer of each accepted connection
// (mdvsock.Listener offers no way to set it once on the listening socket,
// whose children would inherit it).
type sizedListener struct {
	net.Listener
	size uint64
}

func (l sizedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	_ = SetBufferSize(c, l.size) // on failure the connection keeps the kernel's window
	return c, nil
}

// SetBufferSize sets the receive buffer of the AF_VSOCK connection c to
// size bytes (SO_VM_SOCKETS_BUFFER_MAX_SIZE, then SO_VM_SOCKETS_BUFFER_SIZE;
// see AFVSockTransport.BufferSize). It fails when c exposes no socket
// (syscall.Conn) or the kernel refuses either option (e.g. c is not
// AF_VSOCK: ENOPROTOOPT).
func SetBufferSize(c net.Conn, size uint64) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return fmt.Errorf("failed to set vsock buffer size of connection to %v: %w", c.RemoteAddr(), errors.ErrUnsupported)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return fmt.Errorf("failed to set vsock buffer size of connection to %v: %w", c.RemoteAddr(), err)
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptUint64(int(fd), unix.AF_VSOCK, unix.SO_VM_SOCKETS_BUFFER_MAX_SIZE, size)
		if serr == nil {
			serr = unix.SetsockoptUint64(int(fd), unix.AF_VSOCK, unix.SO_VM_SOCKETS_BUFFER_SIZE, size)
		}
	})
	if err = errors.Join(err, serr); err != nil {
		return fmt.Errorf("failed to set vsock buffer size of connection to %v to %d: %w", c.RemoteAddr(), size, err)
	}
	return nil
}

// Dial connects to (cid, port). mdvsock.Dial takes no context; when ctx ends
// first, Dial returns ctx's error and closes the connection if the connect
// completes later. The kernel bounds a connect by its own timeout
// (VSOCK_DEFAULT_CONNECT_TIMEOUT, 2 s, in net/vmw_vsock/af_vsock.c), so the
// background connect does not linger.
func (t AFVSockTransport) Dial(ctx context.Context, cid, port uint32) (net.Conn, error) {
	type result struct {
		c   *mdvsock.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := mdvsock.Dial(cid, port, nil)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("failed to dial vsock %d:%d: %w", cid, port, r.err)
		}
		if t.BufferSize != 0 {
			_ = SetBufferSize(r.c, t.BufferSize) // on failure the connection keeps the kernel's window
		}
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				_ = r.c.Close()
			}
		}()
		return nil, fmt.Errorf("failed to dial vsock %d:%d: %w", cid, port, ctx.Err())
	}
}
