package portsec

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
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
// packet of another source address, but for a DHCPv4 client's broadcast
// from 0.0.0.0 when p has an IPv4 address (DHCPClientRule); any other
// EtherType (VLAN tags included, which would carry addresses past these
// checks).
//
// No rule has an interval set (one with a prefix or a range): IPv6
// link-local sources are matched apart ("ip6 saddr != fe80::/10"), and the
// sets left hold single values. Before it adds an element to a map, nft
// (1.0.6, Debian bookworm's) reads the elements of every interval set in
// the table, one netlink dump per set: one such set per port made every
// ADD's nft run grow with the ports on the node.
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
			DHCPClientRule,
			"ether type ip ip saddr != "+set+" counter drop")
	}
	rules = append(rules,
		"ether type ip6 ip6 saddr != fe80::/10 ip6 saddr != { "+strings.Join(append(v6, "::"), ", ")+" } counter drop",
		"ether type != { arp, ip, ip6 } counter drop")
	return rules
}

// DHCPClientRule accepts, ahead of the IPv4 source check, what a DHCPv4
// client without an address sends (RFC 2131 §4.1: DISCOVER, and REQUEST in
// the SELECTING, INIT-REBOOT and REBINDING states): source 0.0.0.0, UDP
// from port 68 to port 67, to the limited broadcast. It is how a guest
// gets its address from the node agent's DHCP responder
// (internal/node/dhcp); the frame's source MAC has been checked by then,
// and the responder answers only the MAC recorded for the port's
// attachment. A renewing client sends from its own address, which the
// IPv4 check lets through anyway.
const DHCPClientRule = "ether type ip ip saddr 0.0.0.0 ip daddr 255.255.255.255 udp sport 68 udp dport 67 accept"

// nftBinary is the nft executable, looked up in PATH.
const nftBinary = "nft"

// run executes script as one nftables transaction (nft -f -): all of it or
// nothing. It returns what the script's list commands printed; the error
// carries nft's message.
func run(ctx context.Context, script string) (stdout string, err error) {
	cmd := exec.CommandContext(ctx, nftBinary, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s -f: %w: %s", nftBinary, err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}

// Available reports, without running it, whether the nft binary is on PATH:
// an error naming it when not.
func Available() error {
	if _, err := exec.LookPath(nftBinary); err != nil {
		return fmt.Errorf("port security needs the %s binary on the node: %w", nftBinary, err)
	}
	return nil
}

// notFound reports whether err is nft's "No such file or directory": the
// table, chain or element to delete does not exist.
func notFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "No such file or directory")
}

// exists reports whether err is nft's "File exists": the object to create
// is already there.
func exists(err error) bool {
	return err != nil && strings.Contains(err.Error(), "File exists")
}

// baseScript makes the table, the dispatch map and the base chain, and sets
// the base chain's one rule (flushed and added again in the same
// transaction, so concurrent ADDs leave exactly one).
func baseScript(b *strings.Builder) {
	t := "bridge " + TableName
	fmt.Fprintf(b, "add table %s { comment \"fastpath port security: each bridge port forwards only its own MAC and IPs\" ; }\n", t)
	fmt.Fprintf(b, "add map %s %s { type ifname : verdict ; }\n", t, portsMap)
	fmt.Fprintf(b, "add chain %s %s { type filter hook prerouting priority filter ; policy accept ; }\n", t, baseChain)
	fmt.Fprintf(b, "flush chain %s %s\n", t, baseChain)
	fmt.Fprintf(b, "add rule %s %s iifname vmap @%s\n", t, baseChain, portsMap)
}

// portScript makes p's chain (emptied first, so that a chain the same port
// left is replaced; for a new chain that is no change), its rules and its
// entry in the dispatch map.
func portScript(b *strings.Builder, p Port) {
	t, chain := "bridge "+TableName, ChainName(p.HostIf)
	fmt.Fprintf(b, "add chain %s %s\n", t, chain)
	fmt.Fprintf(b, "flush chain %s %s\n", t, chain)
	for _, r := range p.Rules() {
		fmt.Fprintf(b, "add rule %s %s %s\n", t, chain, r)
	}
	fmt.Fprintf(b, "add element %s %s { \"%s\" : goto %s }\n", t, portsMap, p.HostIf, chain)
}

// PortScript returns the nftables script Apply runs first for p: it lists
// the chains of the bridge family (nft prints them from the cache it reads
// anyway, before the transaction) and makes p's chain, rules and map entry,
// and nothing else. It fails, changing nothing, when the table or the map
// is missing.
func PortScript(p Port) string {
	var b strings.Builder
	b.WriteString("list chains bridge\n")
	portScript(&b, p)
	return b.String()
}

// ApplyScript returns the nftables script that makes the table, the
// dispatch map, the base chain and its rule, and p's chain, rules and map
// entry: what Apply runs when PortScript finds no table, map or base chain.
func ApplyScript(p Port) string {
	var b strings.Builder
	baseScript(&b)
	portScript(&b, p)
	return b.String()
}

// hasBaseChain reports whether listing, nft's output of "list chains
// bridge", shows table TableName with its base chain on the prerouting hook.
func hasBaseChain(listing string) bool {
	var inTable, inBase bool
	for _, line := range strings.Split(listing, "\n") {
		switch line = strings.TrimSpace(line); {
		case strings.HasPrefix(line, "table "):
			inTable, inBase = line == "table bridge "+TableName+" {", false
		case strings.HasPrefix(line, "chain "):
			inBase = inTable && line == "chain "+baseChain+" {"
		case inBase && strings.Contains(line, "hook prerouting"):
			return true
		}
	}
	return false
}

// Apply installs p's rules: its chain (replacing one of the same port) and
// its entry in the dispatch map, in one nftables transaction, so the port is
// never half filtered. Frames p.HostIf sends before Apply returns are not
// filtered, so call it before the port carries traffic.
//
// On a node that has the table, Apply executes nft once, with PortScript,
// which only creates objects. A transaction that also changed or deleted
// existing ones (an idempotent "add chain" of the base chain or a flush of
// its rule are both) would leave the kernel old objects to free after an RCU
// grace period, and nft waits for that when it exits, holding the network
// namespace's nftables commit mutex, so concurrent ADDs would queue behind
// one another. When the table, the map or the base chain is missing (the
// node's first port, or someone deleted them), Apply executes nft a second
// time, with ApplyScript, which makes them all. sigs.k8s.io/knftables would
// execute nft twice more on every use, to probe it.
func Apply(ctx context.Context, p Port) error {
	if len(p.MAC) != 6 {
		return fmt.Errorf("failed to apply port security to %s: MAC %q is not a 48-bit MAC address", p.HostIf, p.MAC)
	}
	if !validIfName(p.HostIf) {
		return fmt.Errorf("failed to apply port security: interface name %q is not 1-15 characters of [a-zA-Z0-9_.-]", p.HostIf)
	}
	listing, err := run(ctx, PortScript(p))
	if err == nil && hasBaseChain(listing) {
		return nil
	}
	if err != nil && !notFound(err) {
		return fmt.Errorf("failed to apply port security to %s (it needs the nft binary on the node): %w", p.HostIf, err)
	}
	if _, err := run(ctx, ApplyScript(p)); err != nil {
		return fmt.Errorf("failed to apply port security to %s (it needs the nft binary on the node): %w", p.HostIf, err)
	}
	return nil
}

// Remove deletes the rules of the port hostIf: its map entry and its chain.
// Nothing to delete (no table, no entry, no chain) is success. The common
// case is one execution of nft; when something is missing, the entry and
// the chain are deleted one by one.
func Remove(ctx context.Context, hostIf string) error {
	if !validIfName(hostIf) {
		return fmt.Errorf("failed to remove port security: interface name %q is not 1-15 characters of [a-zA-Z0-9_.-]", hostIf)
	}
	t, chain := "bridge "+TableName, ChainName(hostIf)
	elem := fmt.Sprintf("delete element %s %s { \"%s\" }\n", t, portsMap, hostIf)
	chains := fmt.Sprintf("flush chain %s %s\ndelete chain %s %s\n", t, chain, t, chain)
	_, err := run(ctx, elem+chains)
	if !notFound(err) {
		if err != nil {
			return fmt.Errorf("failed to remove port security of %s: %w", hostIf, err)
		}
		return nil
	}
	for _, script := range []string{elem, chains} {
		if _, err := run(ctx, script); err != nil && !notFound(err) {
			return fmt.Errorf("failed to remove port security of %s: %w", hostIf, err)
		}
	}
	return nil
}

// Check verifies that the port hostIf has its chain and its entry in the
// dispatch map (not the rules themselves: Apply replaces them whole), and
// that the base chain dispatches through the map (Apply makes that rule
// only with the base chain, so one deleted on its own stays deleted). The
// error says which is missing.
func Check(ctx context.Context, hostIf string) error {
	if !validIfName(hostIf) {
		return fmt.Errorf("failed to check port security: interface name %q is not 1-15 characters of [a-zA-Z0-9_.-]", hostIf)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, nftBinary, "list", "table", "bridge", TableName)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("port security of %s is missing: cannot list nftables table bridge %s: %w: %s", hostIf, TableName, err, strings.TrimSpace(stderr.String()))
	}
	out, chain := stdout.String(), ChainName(hostIf)
	if !strings.Contains(out, "chain "+chain+" {") {
		return fmt.Errorf("port security of %s is missing: table bridge %s has no chain %s", hostIf, TableName, chain)
	}
	if !strings.Contains(out, `"`+hostIf+`" : goto `+chain) {
		return fmt.Errorf("port security of %s is missing: map %s of table bridge %s does not send it to chain %s", hostIf, portsMap, TableName, chain)
	}
	if !hasBaseChain(out) || !strings.Contains(out, "iifname vmap @"+portsMap) {
		return fmt.Errorf("port security of %s is missing: table bridge %s has no base chain %s that dispatches through map %s", hostIf, TableName, baseChain, portsMap)
	}
	return nil
}

// validIfName reports whether name can be an interface name and so is safe
// in an nft script: 1-15 characters of [a-zA-Z0-9_.-].
func validIfName(name string) bool {
	if len(name) == 0 || len(name) > 15 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
