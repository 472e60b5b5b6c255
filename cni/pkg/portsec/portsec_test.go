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

func TestApplyScript(t *testing.T) {
	g := NewWithT(t)
	mac, _ := net.ParseMAC("02:fa:57:00:00:01")
	script := ApplyScript(Port{HostIf: "fp0123456789abc", MAC: mac, IPs: []net.IP{net.ParseIP("10.250.0.2")}})
	g.Expect(script).To(HavePrefix("add table bridge fastpath"))
	g.Expect(script).To(ContainSubstring("flush chain bridge fastpath prerouting\nadd rule bridge fastpath prerouting iifname vmap @ports\n"))
	g.Expect(script).To(ContainSubstring("add rule bridge fastpath port-fp0123456789abc ether saddr != 02:fa:57:00:00:01 counter drop\n"))
	g.Expect(script).To(HaveSuffix("add element bridge fastpath ports { \"fp0123456789abc\" : goto port-fp0123456789abc }\n"))
	for _, bad := range []string{"", "fp0123456789abcd", `fp"; flush ruleset`} {
		g.Expect(validIfName(bad)).To(BeFalse(), bad)
	}
}
