package guests

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	dhcp "github.com/krolaw/dhcp4"
	dhcpconn "github.com/krolaw/dhcp4/conn"

	"github.com/fastpath-io/fastpath/bench/topology"
)

// DHCPLease is what the emulated virt-launcher hands one guest NIC, as
// KubeVirt's single-client DHCP server does (pkg/network/dhcp/server): one
// client MAC, one address.
type DHCPLease struct {
	// MAC is the only client served (the guest NIC's MAC).
	MAC net.HardwareAddr
	// Address is the guest's address and prefix, e.g. 10.250.0.3/24.
	Address netip.Prefix
	// Router is the default gateway offered; invalid for none (a node-local
	// fast-path network has none).
	Router netip.Addr
	// ServerIP identifies the server (DHCP option 54), e.g. 10.0.2.1 for the
	// masquerade binding or KubeVirt's 169.254.75.10 for the bridge binding.
	ServerIP netip.Addr
	// MTU is offered as option 26 (0 for none), as KubeVirt does.
	MTU int
	// Hostname is offered as option 12 ("" for none).
	Hostname string
}

// leaseDuration is KubeVirt's infinite lease (math.MaxUint32 seconds).
const leaseDuration = time.Duration(1<<32-1) * time.Second

// DHCPServer serves one DHCPLease on one interface of a launcher namespace
// with github.com/krolaw/dhcp4, the library KubeVirt's virt-launcher uses.
type DHCPServer struct {
	lease DHCPLease
	conn  net.PacketConn
	done  chan struct{}
	mu    sync.Mutex
	acked int
}

// ServeDHCP starts a DHCP server bound (SO_BINDTODEVICE) to ifName inside
// the launcher namespace ns. It fails when the socket cannot be opened or
// the lease is incomplete (MAC, Address and ServerIP are required).
func ServeDHCP(ns *topology.NetNS, ifName string, lease DHCPLease) (*DHCPServer, error) {
	if len(lease.MAC) != 6 || !lease.Address.IsValid() || !lease.Address.Addr().Is4() || !lease.ServerIP.Is4() {
		return nil, fmt.Errorf("failed to serve DHCP on %s: MAC, an IPv4 Address and an IPv4 ServerIP are required", ifName)
	}
	s := &DHCPServer{lease: lease, done: make(chan struct{})}
	err := ns.Do(func() error {
		var err error
		s.conn, err = dhcpconn.NewUDP4BoundListener(ifName, ":67")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to open the DHCP socket on %s in %s: %w", ifName, ns.Name, err)
	}
	go func() {
		defer close(s.done)
		_ = dhcp.Serve(s.conn, s)
	}()
	return s, nil
}

// Acked returns how many DHCPACKs the server sent.
func (s *DHCPServer) Acked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked
}

// Close stops the server and waits for it.
func (s *DHCPServer) Close() error {
	err := s.conn.Close()
	<-s.done
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("failed to close the DHCP server: %w", err)
	}
	return nil
}

// ServeDHCP implements dhcp4.Handler: DISCOVER gets an OFFER and REQUEST an
// ACK (or NAK for another address) of the lease; other clients are ignored.
func (s *DHCPServer) ServeDHCP(p dhcp.Packet, msgType dhcp.MessageType, options dhcp.Options) dhcp.Packet {
	if p.CHAddr().String() != s.lease.MAC.String() {
		return nil
	}
	server := net.IP(s.lease.ServerIP.AsSlice())
	client := net.IP(s.lease.Address.Addr().AsSlice())
	switch msgType {
	case dhcp.Discover:
		return dhcp.ReplyPacket(p, dhcp.Offer, server, client, leaseDuration, s.options().SelectOrderOrAll(options[dhcp.OptionParameterRequestList]))
	case dhcp.Request:
		if id, ok := options[dhcp.OptionServerIdentifier]; ok && !net.IP(id).Equal(server) {
			return nil // the client chose another server
		}
		want := net.IP(options[dhcp.OptionRequestedIPAddress])
		if want == nil {
			want = p.CIAddr()
		}
		if !want.Equal(client) {
			return dhcp.ReplyPacket(p, dhcp.NAK, server, nil, 0, nil)
		}
		s.mu.Lock()
		s.acked++
		s.mu.Unlock()
		return dhcp.ReplyPacket(p, dhcp.ACK, server, client, leaseDuration, s.options().SelectOrderOrAll(options[dhcp.OptionParameterRequestList]))
	}
	return nil
}

func (s *DHCPServer) options() dhcp.Options {
	mask := net.CIDRMask(s.lease.Address.Bits(), 32)
	o := dhcp.Options{dhcp.OptionSubnetMask: []byte(mask)}
	if s.lease.Router.IsValid() {
		o[dhcp.OptionRouter] = s.lease.Router.AsSlice()
	}
	if s.lease.MTU > 0 {
		o[dhcp.OptionInterfaceMTU] = []byte{byte(s.lease.MTU >> 8), byte(s.lease.MTU)}
	}
	if s.lease.Hostname != "" {
		o[dhcp.OptionHostName] = []byte(s.lease.Hostname)
	}
	return o
}
