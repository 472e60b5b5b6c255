package portsec

import (
	"net"
	"strings"
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

func TestApplyScript(t *testing.T) {
	g := NewWithT(t)
	mac, _ := net.ParseMAC("02:fa:57:00:00:01")
	script := ApplyScript(Port{HostIf: "fp0123456789abc", MAC: mac, IPs: []net.IP{net.ParseIP("10.250.0.2")}})
	g.Expect(script).To(HavePrefix("add table bridge fastpath"))
	g.Expect(script).To(ContainSubstring("flush chain bridge fastpath prerouting\nadd rule bridge fastpath prerouting iifname vmap @ports\n"))
	g.Expect(script).To(ContainSubstring("add rule bridge fastpath port-fp0123456789abc ether saddr != 02:fa:57:00:00:01 counter drop\n"))
	g.Expect(script).To(HaveSuffix("add element bridge fastpath ports { \"fp0123456789abc\" : goto port-fp0123456789abc }\n"))
	// The script of a node that has the table creates the port's objects
	// and changes nothing that exists.
	port := PortScript(Port{HostIf: "fp0123456789abc", MAC: mac, IPs: []net.IP{net.ParseIP("10.250.0.2")}})
	g.Expect(port).To(HavePrefix("list chains bridge\nadd chain bridge fastpath port-fp0123456789abc\n"))
	g.Expect(port).NotTo(ContainSubstring("prerouting"))
	g.Expect(port).NotTo(ContainSubstring("add table"))
	g.Expect(port).NotTo(ContainSubstring("add map"))
	g.Expect(script).To(HaveSuffix(port[len("list chains bridge\n"):]))
	for _, bad := range []string{"", "fp0123456789abcd", `fp"; flush ruleset`} {
		g.Expect(validIfName(bad)).To(BeFalse(), bad)
	}
}

func TestHasBaseChain(t *testing.T) {
	g := NewWithT(t)
	ours := "table bridge fastpath {\n\tchain prerouting {\n\t\ttype filter hook prerouting priority filter; policy accept;\n\t}\n\tchain port-fp1 {\n\t}\n}\n"
	other := "table bridge other {\n\tchain prerouting {\n\t\ttype filter hook prerouting priority filter; policy accept;\n\t}\n}\n"
	bare := "table bridge fastpath {\n\tchain port-fp1 {\n\t}\n}\n"
	g.Expect(hasBaseChain(ours)).To(BeTrue())
	g.Expect(hasBaseChain(other + ours)).To(BeTrue())
	g.Expect(hasBaseChain("")).To(BeFalse())
	g.Expect(hasBaseChain(other+bare)).To(BeFalse(), "another table's base chain is not ours")
	g.Expect(hasBaseChain(bare + other)).To(BeFalse())
	g.Expect(hasBaseChain(strings.Replace(ours, "hook prerouting", "hook input", 1))).To(BeFalse())
}
