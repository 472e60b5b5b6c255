package dhcp

import (
	"net"
	"net/netip"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/node/leases"
)

func TestReply(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	l := &leases.Lease{MAC: mac.String(), Bridge: "br", Address: netip.MustParsePrefix("10.56.0.7/24"),
		Gateway: netip.MustParseAddr("10.56.0.1"), MTU: 9000}
	noGW := *l
	noGW.Gateway, noGW.MTU = netip.Addr{}, 0
	sid := DefaultServerID
	msg := func(t dhcpv4.MessageType, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
		m, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(mac), dhcpv4.WithMessageType(t)}, mods...)...)
		if err != nil {
			panic(err)
		}
		return m
	}
	addr := net.ParseIP("10.56.0.7").To4()
	for _, tc := range []struct {
		name  string
		m     *dhcpv4.DHCPv4
		l     *leases.Lease
		want  dhcpv4.MessageType // MessageTypeNone: ignored
		check func(g *WithT, r *dhcpv4.DHCPv4)
	}{
		{name: "discover", m: msg(dhcpv4.MessageTypeDiscover), l: l, want: dhcpv4.MessageTypeOffer, check: func(g *WithT, r *dhcpv4.DHCPv4) {
			g.Expect(r.YourIPAddr.Equal(addr)).To(BeTrue())
			g.Expect(r.SubnetMask()).To(Equal(net.CIDRMask(24, 32)))
			g.Expect(r.Router()).To(Equal([]net.IP{net.ParseIP("10.56.0.1").To4()}))
			g.Expect(r.GetOneOption(dhcpv4.OptionInterfaceMTU)).To(Equal([]byte{0x23, 0x28}))
			g.Expect(r.ServerIdentifier().Equal(net.ParseIP("169.254.75.254"))).To(BeTrue())
			g.Expect(r.IPAddressLeaseTime(0)).To(Equal(DefaultLeaseTime))
			g.Expect(r.ClientHWAddr).To(Equal(mac))
		}},
		{name: "discover without gateway or MTU", m: msg(dhcpv4.MessageTypeDiscover), l: &noGW, want: dhcpv4.MessageTypeOffer, check: func(g *WithT, r *dhcpv4.DHCPv4) {
			g.Expect(r.Router()).To(BeEmpty())
			g.Expect(r.GetOneOption(dhcpv4.OptionInterfaceMTU)).To(BeNil())
		}},
		{name: "request selecting", m: msg(dhcpv4.MessageTypeRequest, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(addr)),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IP(sid.AsSlice())))), l: l, want: dhcpv4.MessageTypeAck,
			check: func(g *WithT, r *dhcpv4.DHCPv4) { g.Expect(r.YourIPAddr.Equal(addr)).To(BeTrue()) }},
		{name: "request renewing (ciaddr)", m: msg(dhcpv4.MessageTypeRequest, dhcpv4.WithClientIP(addr)), l: l, want: dhcpv4.MessageTypeAck},
		{name: "request for another address", m: msg(dhcpv4.MessageTypeRequest, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.56.0.8")))),
			l: l, want: dhcpv4.MessageTypeNak, check: func(g *WithT, r *dhcpv4.DHCPv4) {
				g.Expect(r.YourIPAddr.IsUnspecified()).To(BeTrue())
				g.Expect(r.ServerIdentifier().Equal(net.ParseIP("169.254.75.254"))).To(BeTrue())
			}},
		{name: "request for another server", m: msg(dhcpv4.MessageTypeRequest, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(addr)),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("192.0.2.1")))), l: l},
		{name: "unknown MAC", m: msg(dhcpv4.MessageTypeDiscover)},
		{name: "unknown MAC request", m: msg(dhcpv4.MessageTypeRequest, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(addr)))},
		{name: "release", m: msg(dhcpv4.MessageTypeRelease), l: l},
		{name: "decline", m: msg(dhcpv4.MessageTypeDecline), l: l},
		{name: "reply", m: msg(dhcpv4.MessageTypeOffer, dhcpv4.WithReply(msg(dhcpv4.MessageTypeDiscover))), l: l},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r, err := reply(tc.m, tc.l, sid, DefaultLeaseTime)
			if tc.want == dhcpv4.MessageTypeNone {
				g.Expect(err).To(MatchError(errIgnore))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.MessageType()).To(Equal(tc.want))
			g.Expect(r.TransactionID).To(Equal(tc.m.TransactionID))
			if tc.check != nil {
				tc.check(g, r)
			}
		})
	}
}
