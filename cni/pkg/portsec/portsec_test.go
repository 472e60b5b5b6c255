package portsec

import (
	"net"
	"testing"

	. "github.com/onsi/gomega"
)

func TestRules(t *testing.T) {
	g := NewWithT(t)
	mac, _ := net.ParseMAC("02:fa:57:00:00:01")
	g.Expect(Port{HostIf: "fp1", MAC: mac, IPs: []net.IP{net.ParseIP("10.250.0.3"), net.ParseIP("fd00::3"), net.ParseIP("10.250.0.2")}}.Rules()).To(Equal([]string{
		"ether saddr != 02:fa:57:00:00:01 counter drop",
		"ether type arp arp saddr ether != 02:fa:57:00:00:01 counter drop",
		"ether type arp arp saddr ip != { 10.250.0.2, 10.250.0.3 } counter drop",
		"ether type ip ip saddr != { 10.250.0.2, 10.250.0.3 } counter drop",
		"ether type ip6 ip6 saddr != { fd00::3, fe80::/10, :: } counter drop",
		"ether type != { arp, ip, ip6 } counter drop",
	}))
	// IPv6 only: no IPv4 and no ARP at all.
	g.Expect(Port{HostIf: "fp1", MAC: mac, IPs: []net.IP{net.ParseIP("fd00::3")}}.Rules()).To(ContainElements(
		"ether type arp counter drop", "ether type ip counter drop"))
	g.Expect(ChainName("fp0123456789abc")).To(Equal("port-fp0123456789abc"))
}
