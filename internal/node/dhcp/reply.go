package dhcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// DefaultServerID is the server identifier (option 54) and source address
// of the responder's replies: link-local, as the bridges have no IPv4
// address. It is the last address of the 169.254.75.0/24 KubeVirt gives
// the in-pod bridges of its bridge binding for its own DHCP server
// (169.254.75.1x), not one of them.
var DefaultServerID = netip.MustParseAddr("169.254.75.254")

// DefaultLeaseTime is the lease time (option 51) of the replies: the
// address is the attachment's as long as its pod lives, as KubeVirt's
// in-pod DHCP server says with its 999 days (pkg/network/dhcp/server,
// infiniteLease).
const DefaultLeaseTime = 999 * 24 * time.Hour

// errIgnore marks a message the responder must not answer; the reason is
// the error's text.
var errIgnore = errors.New("ignored")

// ignore returns an errIgnore with the reason format, args.
func ignore(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errIgnore}, args...)...)
}

// reply returns the answer to m from a client whose lease is l (nil: no
// lease on this bridge), or an error wrapping errIgnore when m gets none:
//
//   - DISCOVER: an OFFER of l.Address.
//   - REQUEST naming another server (option 54): none, the client chose it.
//   - REQUEST for l.Address (option 50, or ciaddr when renewing): an ACK.
//   - REQUEST for any other address: a NAK.
//   - anything else (RELEASE, DECLINE, INFORM, a BOOTREPLY, not Ethernet): none.
//
// OFFER and ACK carry yiaddr, the subnet mask, the router when l has a
// gateway, the interface MTU (option 26) when l has one, the lease time and
// the server identifier.
func reply(m *dhcpv4.DHCPv4, l *leases.Lease, serverID netip.Addr, leaseTime time.Duration) (*dhcpv4.DHCPv4, error) {
	if m.OpCode != dhcpv4.OpcodeBootRequest || m.HWType != iana.HWTypeEthernet || len(m.ClientHWAddr) != 6 {
		return nil, ignore("not a BOOTREQUEST from an Ethernet client")
	}
	t := m.MessageType()
	if t != dhcpv4.MessageTypeDiscover && t != dhcpv4.MessageTypeRequest {
		return nil, ignore("message type %s", t)
	}
	if l == nil {
		return nil, ignore("no lease for %s", m.ClientHWAddr)
	}
	sid := net.IP(serverID.AsSlice())
	addr := net.IP(l.Address.Addr().AsSlice())
	if t == dhcpv4.MessageTypeRequest {
		if s := m.ServerIdentifier(); s != nil && !s.Equal(sid) {
			return nil, ignore("REQUEST for server %s", s)
		}
		want := m.RequestedIPAddress()
		if want == nil {
			want = m.ClientIPAddr
		}
		if !want.Equal(addr) {
			return dhcpv4.NewReplyFromRequest(m,
				dhcpv4.WithMessageType(dhcpv4.MessageTypeNak),
				dhcpv4.WithOption(dhcpv4.OptServerIdentifier(sid)),
				dhcpv4.WithOption(dhcpv4.OptMessage(fmt.Sprintf("%s is not the address of %s", want, m.ClientHWAddr))))
		}
	}
	typ := dhcpv4.MessageTypeOffer
	if t == dhcpv4.MessageTypeRequest {
		typ = dhcpv4.MessageTypeAck
	}
	mods := []dhcpv4.Modifier{
		dhcpv4.WithMessageType(typ),
		dhcpv4.WithYourIP(addr),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(sid)),
		dhcpv4.WithOption(dhcpv4.OptSubnetMask(net.CIDRMask(l.Address.Bits(), 32))),
		dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(leaseTime)),
	}
	if l.Gateway.IsValid() {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptRouter(net.IP(l.Gateway.AsSlice()))))
	}
	if l.MTU > 0 && l.MTU <= 0xffff {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, binary.BigEndian.AppendUint16(nil, uint16(l.MTU)))))
	}
	return dhcpv4.NewReplyFromRequest(m, mods...)
}
