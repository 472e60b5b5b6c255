package portsec

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// TableName is the node's nftables table (family bridge) holding the port
// security rules of every attachment.
const TableName = wellknown.PortSecurityTable

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

// Rules returns the rules of p's chain, in nftables syntax, in order: what
// Apply installs (it builds the same expressions nft compiles these to) and
// what nft lists. Every frame that does not match p is dropped and
// counted: another source MAC; an ARP packet of another sender MAC or IPv4
// address; an IPv4 or IPv6 packet of another source address, but for a
// DHCPv4 client's broadcast from 0.0.0.0 when p has an IPv4 address
// (DHCPClientRule); any other EtherType (VLAN tags included, which would
// carry addresses past these checks).
//
// No rule has an interval set (one with a prefix or a range): IPv6
// link-local sources are matched apart ("ip6 saddr != fe80::/10", a mask
// and a comparison), and the sets left are constant anonymous sets of
// single values (a set of one value is a comparison, as nft makes it).
// That kept nft (1.0.6, Debian bookworm's), which the plugin executed
// before it spoke netlink, from reading every port's interval set on each
// ADD, and it keeps anyone's "nft list" of the table cheap.
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
	rules = append(rules, ServerRules...)
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

// ServerRules drop, from every port, what only a network's DHCP server or
// router sends: DHCPv4 server traffic (UDP from port 67, or to a client's
// port 68), DHCPv6 server and relay traffic (UDP from port 547, or to a
// client's port 546) and ICMPv6 router advertisements (type 134). A guest
// that answered DISCOVERs or advertised itself as the IPv6 router would
// hand its neighbours addresses, routes and DNS servers of its choosing:
// the node agent's responder (internal/node/dhcp) is the network's only
// DHCP server, and a Fastpath network has no router of its own. The kernel
// finds the transport header past IPv6 extension headers (meta l4proto), so
// a Hop-by-Hop header does not hide either. They come right after the MAC
// checks, ahead of DHCPClientRule's accept.
var ServerRules = []string{
	"ether type ip udp sport 67 counter drop",
	"ether type ip udp dport 68 counter drop",
	"ether type ip6 udp sport 547 counter drop",
	"ether type ip6 udp dport 546 counter drop",
	"ether type ip6 icmpv6 type nd-router-advert counter drop",
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

// table is the node's port security table.
var table = &nftables.Table{Family: nftables.TableFamilyBridge, Name: TableName}

// portsSet is the dispatch map: "type ifname : verdict". Its comment is the
// table's explanation: google/nftables v0.3.0 cannot comment a table.
func portsSet() *nftables.Set {
	return &nftables.Set{Table: table, Name: portsMap, IsMap: true, KeyType: nftables.TypeIFName,
		DataType: nftables.TypeVerdict, KeyByteOrder: binaryutil.NativeEndian,
		Comment: "fastpath port security: each bridge port forwards only its own MAC and IPs"}
}

// addBase adds to c's batch the table, the dispatch map, the base chain and
// its one rule (the chain is flushed and the rule added again in the same
// transaction, so concurrent ADDs leave exactly one).
func addBase(c *conn) error {
	c.AddTable(table)
	ports := portsSet()
	if err := addSet(c, ports, nil); err != nil {
		return err
	}
	base := c.AddChain(&nftables.Chain{Name: baseChain, Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(bridgeFilterPri),
		Policy: ptr(nftables.ChainPolicyAccept)})
	c.FlushChain(base)
	c.AddRule(&nftables.Rule{Table: table, Chain: base, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: ports.Name, SetID: ports.ID, DestRegister: 0, IsDestRegSet: true},
	}})
	return nil
}

// addPort adds to c's batch p's chain (emptied first, so that a chain the
// same port left is replaced; for a new chain that is no change), its
// rules and its entry in the dispatch map: objects it creates, and nothing
// it changes or deletes but an earlier chain of p.
func addPort(c *conn, p Port) error {
	chain := c.AddChain(&nftables.Chain{Name: ChainName(p.HostIf), Table: table})
	c.FlushChain(chain)
	if err := (&batch{c: c, table: table}).addRules(chain, p); err != nil {
		return err
	}
	return c.SetAddElements(portsSet(), []nftables.SetElement{{Key: ifnameKey(p.HostIf),
		VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: chain.Name}}})
}

func ptr[T any](v T) *T { return &v }

// hasBaseChain reports whether info is the base chain Apply makes: on the
// bridge family's prerouting hook.
func hasBaseChain(info chainInfo) bool {
	return info.base && info.hook == nfBrPreRouting
}

// Apply installs p's rules: its chain (replacing one of the same port) and
// its entry in the dispatch map, in one nftables transaction (one netlink
// batch, which the kernel applies whole or not at all), so the port is
// never half filtered and a failed Apply leaves nothing. Frames p.HostIf
// sends before Apply returns are not filtered, so call it before the port
// carries traffic. It talks netlink to the kernel from the calling thread's
// network namespace; no nft binary is needed.
//
// On a node that has the base chain, Apply reads it (one netlink request)
// and sends one batch that only creates objects (addPort). A transaction
// that also changed or deleted existing ones (an idempotent add of the
// base chain or a flush of its rule are both) would leave the kernel old
// objects to free after an RCU grace period, and closing the netlink
// socket waits for that, holding the network namespace's nftables commit
// mutex, so concurrent ADDs would queue behind one another. When the base
// chain is missing (the node's first port, or someone deleted it), or the
// batch finds no table or map, Apply sends a batch that makes them all too.
// ctx's deadline bounds the netlink exchange.
func Apply(ctx context.Context, p Port) error {
	if len(p.MAC) != 6 {
		return fmt.Errorf("failed to apply port security to %s: MAC %q is not a 48-bit MAC address", p.HostIf, p.MAC)
	}
	if !validIfName(p.HostIf) {
		return fmt.Errorf("failed to apply port security: interface name %q is not 1-15 characters of [a-zA-Z0-9_.-]", p.HostIf)
	}
	c, err := dialCtx(ctx)
	if err != nil {
		return fmt.Errorf("failed to apply port security to %s: %w", p.HostIf, err)
	}
	defer c.close()
	base, err := c.getChain(table.Family, TableName, baseChain)
	if err != nil && !notFound(err) {
		return fmt.Errorf("failed to apply port security to %s: failed to read chain bridge %s %s: %w", p.HostIf, TableName, baseChain, err)
	}
	if err == nil && hasBaseChain(base) {
		if err := addPort(c, p); err != nil {
			return fmt.Errorf("failed to apply port security to %s: %w", p.HostIf, err)
		}
		err := c.Flush()
		if err == nil {
			return nil
		}
		if !notFound(err) {
			return fmt.Errorf("failed to apply port security to %s: %w", p.HostIf, err)
		}
	}
	if err := addBase(c); err != nil {
		return fmt.Errorf("failed to apply port security to %s: %w", p.HostIf, err)
	}
	if err := addPort(c, p); err != nil {
		return fmt.Errorf("failed to apply port security to %s: %w", p.HostIf, err)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("failed to apply port security to %s: %w", p.HostIf, err)
	}
	return nil
}

// dialCtx is dial with ctx's deadline on the socket.
func dialCtx(ctx context.Context) (*conn, error) {
	c, err := dial()
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		if err := c.nl.SetDeadline(d); err != nil {
			c.close()
			return nil, fmt.Errorf("failed to set the deadline of the nf_tables netlink socket: %w", err)
		}
	}
	return c, nil
}

// Remove deletes the rules of the port hostIf: its map entry and its chain.
// Nothing to delete (no table, no entry, no chain) is success. The common
// case is one netlink batch; when something is missing, the entry and the
// chain are deleted one by one.
func Remove(ctx context.Context, hostIf string) error {
	if !validIfName(hostIf) {
		return fmt.Errorf("failed to remove port security: interface name %q is not 1-15 characters of [a-zA-Z0-9_.-]", hostIf)
	}
	c, err := dialCtx(ctx)
	if err != nil {
		return fmt.Errorf("failed to remove port security of %s: %w", hostIf, err)
	}
	defer c.close()
	chain := &nftables.Chain{Name: ChainName(hostIf), Table: table}
	elem := func() error {
		return c.SetDeleteElements(portsSet(), []nftables.SetElement{{Key: ifnameKey(hostIf)}})
	}
	chains := func() error {
		c.FlushChain(chain)
		c.DelChain(chain)
		return nil
	}
	err = flush(c, elem, chains)
	if notFound(err) {
		if err = flush(c, elem); notFound(err) {
			err = nil
		}
		if err2 := flush(c, chains); err == nil && !notFound(err2) {
			err = err2
		}
	}
	if err != nil {
		return fmt.Errorf("failed to remove port security of %s: %w", hostIf, err)
	}
	return nil
}

// flush sends what adds put into c's batch as one transaction.
func flush(c *conn, adds ...func() error) error {
	for _, add := range adds {
		if err := add(); err != nil {
			return err
		}
	}
	return c.Flush()
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
	c, err := dialCtx(ctx)
	if err != nil {
		return fmt.Errorf("failed to check port security of %s: %w", hostIf, err)
	}
	defer c.close()
	chain := ChainName(hostIf)
	if _, err := c.getChain(table.Family, TableName, chain); err != nil {
		if notFound(err) {
			return fmt.Errorf("port security of %s is missing: table bridge %s has no chain %s", hostIf, TableName, chain)
		}
		return fmt.Errorf("port security of %s is missing: cannot read chain bridge %s %s: %w", hostIf, TableName, chain, err)
	}
	if !dispatches(c, hostIf) {
		return fmt.Errorf("port security of %s is missing: map %s of table bridge %s does not send it to chain %s", hostIf, portsMap, TableName, chain)
	}
	base, err := c.getChain(table.Family, TableName, baseChain)
	if err != nil || !hasBaseChain(base) || !hasDispatchRule(c) {
		return fmt.Errorf("port security of %s is missing: table bridge %s has no base chain %s that dispatches through map %s", hostIf, TableName, baseChain, portsMap)
	}
	return nil
}

// dispatches reports whether the dispatch map sends hostIf to its chain
// ("goto port-<hostIf>").
func dispatches(c *conn, hostIf string) bool {
	elems, err := c.GetSetElements(portsSet())
	if err != nil {
		return false
	}
	key := ifnameKey(hostIf)
	for _, e := range elems {
		if !bytes.Equal(e.Key, key) {
			continue
		}
		code, chain, err := verdictOf(e.Val)
		return err == nil && code == unix.NFT_GOTO && chain == ChainName(hostIf)
	}
	return false
}

// hasDispatchRule reports whether the base chain has the rule "iifname vmap
// @ports": the input interface's name looked up in the map, whose verdict
// is the rule's.
func hasDispatchRule(c *conn) bool {
	rules, err := c.GetRules(table, &nftables.Chain{Name: baseChain, Table: table})
	if err != nil {
		return false
	}
	for _, r := range rules {
		for i := 0; i+1 < len(r.Exprs); i++ {
			m, ok1 := r.Exprs[i].(*expr.Meta)
			l, ok2 := r.Exprs[i+1].(*expr.Lookup)
			if ok1 && ok2 && m.Key == expr.MetaKeyIIFNAME && !m.SourceRegister && l.SourceRegister == m.Register &&
				l.SetName == portsMap && l.IsDestRegSet && l.DestRegister == unix.NFT_REG_VERDICT && !l.Invert {
				return true
			}
		}
	}
	return false
}

// Available reports whether the kernel's nf_tables answers over netlink in
// the calling thread's network namespace: an error saying why not.
func Available() error {
	c, err := dial()
	if err != nil {
		return fmt.Errorf("port security needs nf_tables: %w", err)
	}
	defer c.close()
	if _, err := c.ListTablesOfFamily(nftables.TableFamilyBridge); err != nil {
		return fmt.Errorf("port security needs nf_tables: failed to list the tables of the bridge family: %w", err)
	}
	return nil
}

// validIfName reports whether name can be an interface name: 1-15
// characters of [a-zA-Z0-9_.-].
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
