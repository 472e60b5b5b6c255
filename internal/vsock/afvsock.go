package vsock

import (
	"context"
	"fmt"
	"net"

	mdvsock "github.com/mdlayher/vsock"
)

// AFVSockTransport is the production Transport: real AF_VSOCK sockets through
// github.com/mdlayher/vsock. Accepted connections report *mdvsock.Addr from
// RemoteAddr (read it with PeerAddr / PeerCID); connections are
// *mdvsock.Conn, which supports CloseWrite.
//
// Never use it on a development machine or in tests: /dev/vsock there is the
// machine's own channel to its hypervisor. Tests use UnixTransport.
type AFVSockTransport struct{}

var _ Transport = AFVSockTransport{}

// Listen listens on port of this machine's own CID (mdvsock.Listen asks the
// kernel with IOCTL_VM_SOCKETS_GET_LOCAL_CID; on a KVM host that is HostCID).
func (AFVSockTransport) Listen(port uint32) (net.Listener, error) {
	l, err := mdvsock.Listen(port, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on vsock port %d: %w", port, err)
	}
	return l, nil
}

// Dial connects to (cid, port). mdvsock.Dial takes no context; when ctx ends
// first, Dial returns ctx's error and closes the connection if the connect
// completes later. The kernel bounds a connect by its own timeout
// (VSOCK_DEFAULT_CONNECT_TIMEOUT, 2 s, in net/vmw_vsock/af_vsock.c), so the
// background connect does not linger.
func (AFVSockTransport) Dial(ctx context.Context, cid, port uint32) (net.Conn, error) {
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
