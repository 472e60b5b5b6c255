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
		"ether type ip udp sport 67 counter drop",
		"ether type ip udp dport 68 counter drop",
		"ether type ip6 udp sport 547 counter drop",
		"ether type ip6 udp dport 546 counter drop",
		"ether type ip6 icmpv6 type nd-router-advert counter drop",
		"ether type arp arp saddr ip != { 10.250.0.2, 10.250.0.3 } counter drop",
		"ether type ip ip saddr 0.0.0.0 ip daddr 255.255.255.255 udp sport 68 udp dport 67 accept",
		"ether type ip ip saddr != { 10.250.0.2, 10.250.0.3 } counter drop",
		"ether type ip6 ip6 saddr != fe80::/10 ip6 saddr != { fd00::3, :: } counter drop",
		"ether type != { arp, ip, ip6 } counter drop",
	}))
	// IPv6 only: no IPv4 and no ARP at all.
	g.Expect(Port{HostIf: "fp1", MAC: mac, IPs: []net.IP{net.ParseIP("fd00::3")}}.Rules()).To(ContainElements(
		"ether type arp counter drop", "ether type ip counter drop"))
	g.Expect(Port{HostIf: "fp1", MAC: mac, IPs: []net.IP{net.ParseIP("fd00::3")}}.Rules()).NotTo(ContainElement(DHCPClientRule),
		"no IPv4 address, no DHCPv4")
	g.Expect(ChainName("fp0123456789abc")).To(Equal("port-fp0123456789abc"))
}

func TestValidIfName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(validIfName("fp0123456789abc")).To(BeTrue())
	for _, bad := range []string{"", "fp0123456789abcd", `fp"; flush ruleset`, "fp/0"} {
		g.Expect(validIfName(bad)).To(BeFalse(), bad)
	}
}

func TestHasBaseChain(t *testing.T) {
	g := NewWithT(t)
	g.Expect(hasBaseChain(chainInfo{base: true, hook: nfBrPreRouting})).To(BeTrue())
	g.Expect(hasBaseChain(chainInfo{})).To(BeFalse(), "a regular chain")
	g.Expect(hasBaseChain(chainInfo{base: true, hook: 1})).To(BeFalse(), "the input hook")
}

func TestIfnameKey(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ifnameKey("fpa")).To(Equal([]byte{'f', 'p', 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}))
	g.Expect(ifnameKey("fp0123456789abc")).To(HaveLen(16))
}
