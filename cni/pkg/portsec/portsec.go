package portsec

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"
)

// TableName is the node's nftables table (family bridge) holding the port
// security rules of every attachment.
const TableName = "fastpath"

const (
	baseChain = "prerouting"
	portsMap  = "ports"
	// chainPrefix + host interface name is a port's chain.
	chainPrefix = "port-"
)

// ChainName returns the chain of the port hostIf: "port-<hostIf>".
func ChainName(hostIf string) string { return chainPrefix + hostIf }

// Port is what one bridge port may send.
type Port struct {
	// HostIf is the bridge port: the host end of the attachment's veth pair,
	// 1-15 characters (the plugin's "fp" + 13 hex digits).
	HostIf string
	// MAC is the only source MAC address (Ethernet and ARP sender) the port
	// forwards.
	MAC net.HardwareAddr
	// IPs are the only IPv4 and IPv6 source addresses (and ARP sender
	// addresses) it forwards. IPv6 link-local sources (fe80::/10) and the
	// unspecified address (::, duplicate address detection) are forwarded
	// too: the kernel derives them from the MAC, and neighbour discovery
	// needs them. No IPv4 address means no IPv4 and no ARP at all.
	IPs []net.IP
}

// Rules returns the rules of p's chain, in nftables syntax, in order.
// Every frame that does not match p is dropped and counted: another source
// MAC; an ARP packet of another sender MAC or IPv4 address; an IPv4 or IPv6
// packet of another source address; any other EtherType (VLAN tags
// included, which would carry addresses past these checks).
func (p Port) Rules() []string {
	var v4, v6 []string
	for _, ip := range p.IPs {
		if ip4 := ip.To4(); ip4 != nil {
			v4 = append(v4, ip4.String())
		} else {
			v6 = append(v6, ip.String())
		}
	}
	slices.Sort(v4)
	slices.Sort(v6)
	mac := p.MAC.String()
	rules := []string{
		"ether saddr != " + mac + " counter drop",
		"ether type arp arp saddr ether != " + mac + " counter drop",
	}
	if len(v4) == 0 {
		rules = append(rules, "ether type arp counter drop", "ether type ip counter drop")
	} else {
		set := "{ " + strings.Join(v4, ", ") + " }"
		rules = append(rules, "ether type arp arp saddr ip != "+set+" counter drop",
			"ether type ip ip saddr != "+set+" counter drop")
	}
	rules = append(rules,
		"ether type ip6 ip6 saddr != { "+strings.Join(append(v6, "fe80::/10", "::"), ", ")+" } counter drop",
		"ether type != { arp, ip, ip6 } counter drop")
	return rules
}

// open returns the nftables interface of TableName.
func open() (knftables.Interface, error) {
	nft, err := knftables.New(knftables.BridgeFamily, TableName)
	if err != nil {
		return nil, fmt.Errorf("failed to open nftables table bridge %s (port security needs nft 1.0.1 or newer on the node): %w", TableName, err)
	}
	return nft, nil
}

// base adds the table, the dispatch map and the base chain to tx. The base
// chain is flushed and its one rule added again in the same transaction, so
// concurrent ADDs leave exactly one rule.
func base(tx *knftables.Transaction) {
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("fastpath port security: each bridge port forwards only its own MAC and IPs")})
	tx.Add(&knftables.Map{Name: portsMap, Type: "ifname : verdict"})
	tx.Add(&knftables.Chain{Name: baseChain, Type: knftables.PtrTo(knftables.FilterType),
		Hook: knftables.PtrTo(knftables.PreroutingHook), Priority: knftables.PtrTo(knftables.FilterPriority)})
	tx.Flush(&knftables.Chain{Name: baseChain})
	tx.Add(&knftables.Rule{Chain: baseChain, Rule: "iifname vmap @" + portsMap})
}

// Apply installs p's rules: its chain (replacing one of the same port) and
// its entry in the dispatch map, in one transaction, so the port is never
// half filtered. p.HostIf must already exist or be about to; frames it sends
// before Apply returns are not filtered, so call it before the port carries
// traffic.
func Apply(ctx context.Context, p Port) error {
	if len(p.MAC) != 6 {
		return fmt.Errorf("failed to apply port security to %s: MAC %q is not a 48-bit MAC address", p.HostIf, p.MAC)
	}
	nft, err := open()
	if err != nil {
		return err
	}
	tx := nft.NewTransaction()
	base(tx)
	chain := ChainName(p.HostIf)
	tx.Add(&knftables.Chain{Name: chain})
	tx.Flush(&knftables.Chain{Name: chain})
	for _, r := range p.Rules() {
		tx.Add(&knftables.Rule{Chain: chain, Rule: r})
	}
	tx.Add(&knftables.Element{Map: portsMap, Key: []string{`"` + p.HostIf + `"`}, Value: []string{"goto " + chain}})
	if err := nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("failed to apply port security to %s: %w", p.HostIf, err)
	}
	return nil
}

// Remove deletes the rules of the port hostIf: its map entry and its chain.
// Nothing to delete (no table, no entry, no chain) is success.
func Remove(ctx context.Context, hostIf string) error {
	nft, err := open()
	if err != nil {
		return err
	}
	chain := ChainName(hostIf)
	chains, err := nft.List(ctx, "chains")
	if knftables.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to list port security chains: %w", err)
	}
	tx := nft.NewTransaction()
	elems, err := nft.ListElements(ctx, "map", portsMap)
	if err != nil && !knftables.IsNotFound(err) {
		return fmt.Errorf("failed to list port security map: %w", err)
	}
	for _, e := range elems {
		if len(e.Key) == 1 && strings.Trim(e.Key[0], `"`) == hostIf {
			tx.Delete(&knftables.Element{Map: portsMap, Key: []string{`"` + hostIf + `"`}})
		}
	}
	if slices.Contains(chains, chain) {
		tx.Flush(&knftables.Chain{Name: chain})
		tx.Delete(&knftables.Chain{Name: chain})
	}
	if tx.NumOperations() == 0 {
		return nil
	}
	if err := nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("failed to remove port security of %s: %w", hostIf, err)
	}
	return nil
}
