package dhcptest

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
)

// Capture counts the DHCPv4 messages a bridge carries, per transaction ID:
// the requests (UDP to port 67) the guests send and the replies (UDP to
// port 68) sent on it, the responder's included (a packet socket sees the
// frames others send on the device).
type Capture struct {
	mu       sync.Mutex
	requests map[dhcpv4.TransactionID]int
	replies  map[dhcpv4.TransactionID]int
}

// NewCapture starts counting on bridge (in the test's network namespace)
// until the test ends.
func NewCapture(t *testing.T, bridge string) *Capture {
	t.Helper()
	ifi, err := net.InterfaceByName(bridge)
	if err != nil {
		t.Fatalf("failed to find bridge %s: %v", bridge, err)
	}
	conn, err := packet.Listen(ifi, packet.Datagram, unix.ETH_P_IP, nil)
	if err != nil {
		t.Fatalf("failed to capture on bridge %s: %v", bridge, err)
	}
	c := &Capture{requests: map[dhcpv4.TransactionID]int{}, replies: map[dhcpv4.TransactionID]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 65536)
		for {
			n, _, err := conn.ReadFrom(b)
			if err != nil {
				return
			}
			c.count(b[:n])
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return c
}

// count counts ipPacket when it is a DHCPv4 message.
func (c *Capture) count(ipPacket []byte) {
	if len(ipPacket) < 20 || ipPacket[9] != unix.IPPROTO_UDP {
		return
	}
	ihl := int(ipPacket[0]&0x0f) * 4
	if ihl < 20 || len(ipPacket) < ihl+8 {
		return
	}
	m, err := dhcpv4.FromBytes(ipPacket[ihl+8:])
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch binary.BigEndian.Uint16(ipPacket[ihl+2:]) {
	case 67:
		c.requests[m.TransactionID]++
	case 68:
		c.replies[m.TransactionID]++
	}
}

// Requests returns how many requests of xid the bridge carried so far.
func (c *Capture) Requests(xid dhcpv4.TransactionID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests[xid]
}

// Replies returns how many replies of xid were sent on the bridge so far.
func (c *Capture) Replies(xid dhcpv4.TransactionID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replies[xid]
}

// BoundClient returns a DHCP client on GuestIf in the guest namespace as a
// bound guest has one (RFC 2131 §4.4.5, RENEWING and REBINDING): its
// messages leave from src, port 68 (the address its lease gave it), and it
// reads every reply to port 68, to src or to the broadcast address (a NAK).
// Like nclient4's own, it sends in Ethernet broadcast frames. Each try
// waits timeout for an answer, doubled at each of tries; it is closed when
// the test ends.
func (g *Guest) BoundClient(t *testing.T, src net.IP, timeout time.Duration, tries int) *nclient4.Client {
	t.Helper()
	var raw *packet.Conn
	err := g.NS.Do(func(ns.NetNS) error {
		ifi, err := net.InterfaceByName(GuestIf)
		if err != nil {
			return err
		}
		raw, err = packet.Listen(ifi, packet.Datagram, unix.ETH_P_IP, nil)
		return err
	})
	if err != nil {
		t.Fatalf("failed to open a packet socket in the guest: %v", err)
	}
	conn := fromConn{
		PacketConn: nclient4.NewBroadcastUDPConn(raw, &net.UDPAddr{Port: nclient4.ClientPort}),
		send:       nclient4.NewBroadcastUDPConn(raw, &net.UDPAddr{IP: src, Port: nclient4.ClientPort}),
	}
	c, err := nclient4.NewWithConn(conn, g.MAC, nclient4.WithTimeout(timeout), nclient4.WithRetry(tries))
	if err != nil {
		raw.Close()
		t.Fatalf("failed to start a DHCP client in the guest: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// fromConn reads through its PacketConn (bound to the client port only) and
// writes through send (which sets the source address).
type fromConn struct {
	net.PacketConn
	send net.PacketConn
}

func (c fromConn) WriteTo(b []byte, addr net.Addr) (int, error) { return c.send.WriteTo(b, addr) }
