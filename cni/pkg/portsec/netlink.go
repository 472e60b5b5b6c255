package portsec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// conn is one nf_tables netlink socket in the calling thread's network
// namespace, for the reads and the one batch of an operation. One socket
// per operation matters: closing a socket that sent to nf_tables makes the
// kernel wait for the RCU grace period of any transaction whose objects are
// still to be freed (nft_rcv_nl_event, NETLINK_URELEASE), holding the
// namespace's nftables commit mutex.
type conn struct {
	*nftables.Conn
	// nl is the socket under Conn, for the requests google/nftables v0.3.0
	// does not decode in full (getChain).
	nl *netlink.Conn
}

// dial opens a conn in the network namespace of the calling thread (lock
// the goroutine to it, as ns.Do does); close it when done.
func dial() (*conn, error) {
	var nl *netlink.Conn
	c, err := nftables.New(nftables.AsLasting(), nftables.WithSockOptions(func(n *netlink.Conn) error {
		nl = n
		return nil
	}))
	if err != nil {
		return nil, fmt.Errorf("failed to open an nf_tables netlink socket: %w", err)
	}
	return &conn{Conn: c, nl: nl}, nil
}

func (c *conn) close() { _ = c.CloseLasting() }

// notFound reports whether err is the kernel's ENOENT: the table, chain,
// set or element named does not exist.
func notFound(err error) bool { return errors.Is(err, unix.ENOENT) }

// Attributes of a chain's hook that golang.org/x/sys/unix does not name
// (include/uapi/linux/netfilter/nf_tables.h).
const (
	nftaHookDevs    = 4 // NFTA_HOOK_DEVS: nested NFTA_DEVICE_NAME
	nftaDeviceName  = 1 // NFTA_DEVICE_NAME
	nftMsgGetChain  = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETCHAIN
	nftMsgNewChain  = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWCHAIN
	nfnetlinkV0     = unix.NFNETLINK_V0
	bridgeFilterPri = -200 // NF_BR_PRI_FILTER_BRIDGED: nft's "priority filter" in the bridge family
	nfBrPreRouting  = 0    // NF_BR_PRE_ROUTING: the bridge family's prerouting hook
)

// chainInfo is what getChain reads of a chain.
type chainInfo struct {
	// base: the chain has a hook.
	base bool
	hook uint32
	// devices are the hook's devices (netdev family).
	devices []string
}

// getChain reads one chain (NFT_MSG_GETCHAIN, no dump). google/nftables
// v0.3.0 has ListChain, but it drops the hook's devices and wraps the
// kernel's error with %v, so ENOENT cannot be told from other failures.
// A missing table or chain is an error that notFound recognises.
func (c *conn) getChain(family nftables.TableFamily, table, chain string) (chainInfo, error) {
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{
		{Type: unix.NFTA_CHAIN_TABLE, Data: []byte(table + "\x00")},
		{Type: unix.NFTA_CHAIN_NAME, Data: []byte(chain + "\x00")},
	})
	if err != nil {
		return chainInfo{}, err
	}
	msgs, err := c.nl.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(nftMsgGetChain), Flags: netlink.Request},
		Data:   append([]byte{byte(family), nfnetlinkV0, 0, 0}, attrs...),
	})
	if err != nil {
		return chainInfo{}, err
	}
	if len(msgs) != 1 || msgs[0].Header.Type != netlink.HeaderType(nftMsgNewChain) || len(msgs[0].Data) < 4 {
		return chainInfo{}, fmt.Errorf("unexpected answer to the request for chain %s: %d messages", chain, len(msgs))
	}
	var info chainInfo
	ad, err := netlink.NewAttributeDecoder(msgs[0].Data[4:])
	if err != nil {
		return chainInfo{}, err
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		if ad.Type() != unix.NFTA_CHAIN_HOOK {
			continue
		}
		info.base = true
		ad.Nested(func(hd *netlink.AttributeDecoder) error {
			for hd.Next() {
				switch hd.Type() {
				case unix.NFTA_HOOK_HOOKNUM:
					info.hook = hd.Uint32()
				case unix.NFTA_HOOK_DEV:
					info.devices = append(info.devices, hd.String())
				case nftaHookDevs:
					hd.Nested(func(dd *netlink.AttributeDecoder) error {
						for dd.Next() {
							if dd.Type() == nftaDeviceName {
								info.devices = append(info.devices, dd.String())
							}
						}
						return nil
					})
				}
			}
			return nil
		})
	}
	return info, ad.Err()
}

// Expressions of the rules, as nft 1.0.6 compiles Port.Rules (nft
// --debug=netlink shows them): a load into register 1, then a comparison
// or a set lookup on it.

// Ethernet types (big endian, as on the wire).
var (
	etherARP  = []byte{0x08, 0x06}
	etherIPv4 = []byte{0x08, 0x00}
	etherIPv6 = []byte{0x86, 0xdd}
)

func load(base expr.PayloadBase, offset, length uint32) expr.Any {
	return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: base, Offset: offset, Len: length}
}

func cmp(op expr.CmpOp, data []byte) expr.Any {
	return &expr.Cmp{Op: op, Register: 1, Data: data}
}

// etherType is "ether type <t>".
func etherType(t []byte) []expr.Any {
	return []expr.Any{load(expr.PayloadBaseLLHeader, 12, 2), cmp(expr.CmpOpEq, t)}
}

// counterDrop is "counter drop".
func counterDrop() []expr.Any {
	return []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}
}

// batch collects the messages of one nftables transaction: the anonymous
// sets of the rules go into it ahead of the rules that look them up.
type batch struct {
	c     *conn
	table *nftables.Table
	err   error
}

// linkDependency is what nft puts ahead of every rule of the netdev
// family that reads the link-layer header: "meta iiftype ether" (the
// device is an Ethernet one, ARPHRD_ETHER in host byte order). The bridge
// family needs none.
func (b *batch) linkDependency() []expr.Any {
	if b.table.Family != nftables.TableFamilyNetdev {
		return nil
	}
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFTYPE, Register: 1},
		cmp(expr.CmpOpEq, binaryutil.NativeEndian.PutUint16(unix.ARPHRD_ETHER))}
}

// notIn is "!= <v>" for one value and "!= { <values> }" for more: nft
// turns an anonymous set of one element into a comparison, and so does
// notIn, so that the kernel holds what nft would have made.
func (b *batch) notIn(keyType nftables.SetDatatype, values [][]byte) expr.Any {
	if len(values) == 1 {
		return cmp(expr.CmpOpNeq, values[0])
	}
	set := &nftables.Set{Table: b.table, Anonymous: true, Constant: true, KeyType: keyType}
	elems := make([]nftables.SetElement, len(values))
	for i, v := range values {
		elems[i] = nftables.SetElement{Key: v}
	}
	if err := addSet(b.c, set, elems); err != nil && b.err == nil {
		b.err = err
	}
	return &expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID, Invert: true}
}

// addRules adds p's rules (Port.Rules, in that order) to chain.
func (b *batch) addRules(chain *nftables.Chain, p Port) error {
	var v4, v6 [][]byte
	for _, ip := range p.IPs {
		if ip4 := ip.To4(); ip4 != nil {
			v4 = append(v4, ip4)
		} else {
			v6 = append(v6, ip.To16())
		}
	}
	slices.SortFunc(v4, bytes.Compare)
	slices.SortFunc(v6, bytes.Compare)
	v6 = append(v6, net.IPv6unspecified.To16())
	mac := []byte(p.MAC)
	var rules [][]expr.Any
	dep := b.linkDependency()
	add := func(parts ...[]expr.Any) {
		rules = append(rules, slices.Concat(append([][]expr.Any{dep}, parts...)...))
	}

	// ether saddr != MAC counter drop
	add([]expr.Any{load(expr.PayloadBaseLLHeader, 6, 6), cmp(expr.CmpOpNeq, mac)}, counterDrop())
	// ether type arp arp saddr ether != MAC counter drop
	add(etherType(etherARP), []expr.Any{load(expr.PayloadBaseNetworkHeader, 8, 6), cmp(expr.CmpOpNeq, mac)}, counterDrop())
	// ServerRules: UDP ports as "udp sport/dport N" (a 2-byte load at offset
	// 0 or 2 of the transport header), "icmpv6 type nd-router-advert" (a
	// 1-byte load at 0), each behind "meta l4proto", as nft compiles them.
	for _, r := range []struct {
		ether       []byte
		proto       byte
		offset, len uint32
		value       []byte
	}{
		{etherIPv4, unix.IPPROTO_UDP, 0, 2, []byte{0, 67}},
		{etherIPv4, unix.IPPROTO_UDP, 2, 2, []byte{0, 68}},
		{etherIPv6, unix.IPPROTO_UDP, 0, 2, []byte{0x02, 0x23}},
		{etherIPv6, unix.IPPROTO_UDP, 2, 2, []byte{0x02, 0x22}},
		{etherIPv6, unix.IPPROTO_ICMPV6, 0, 1, []byte{134}},
	} {
		add(etherType(r.ether), []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, cmp(expr.CmpOpEq, []byte{r.proto}),
			load(expr.PayloadBaseTransportHeader, r.offset, r.len), cmp(expr.CmpOpEq, r.value),
		}, counterDrop())
	}
	if len(v4) == 0 {
		add(etherType(etherARP), counterDrop())
		add(etherType(etherIPv4), counterDrop())
	} else {
		// ether type arp arp saddr ip != { v4 } counter drop
		add(etherType(etherARP), []expr.Any{load(expr.PayloadBaseNetworkHeader, 14, 4), b.notIn(nftables.TypeIPAddr, v4)}, counterDrop())
		// DHCPClientRule; nft loads udp sport and dport as one 4-byte field.
		add(etherType(etherIPv4), []expr.Any{
			load(expr.PayloadBaseNetworkHeader, 12, 4), cmp(expr.CmpOpEq, net.IPv4zero.To4()),
			load(expr.PayloadBaseNetworkHeader, 16, 4), cmp(expr.CmpOpEq, net.IPv4bcast.To4()),
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, cmp(expr.CmpOpEq, []byte{unix.IPPROTO_UDP}),
			load(expr.PayloadBaseTransportHeader, 0, 4), cmp(expr.CmpOpEq, []byte{0, 68, 0, 67}),
			&expr.Verdict{Kind: expr.VerdictAccept},
		})
		// ether type ip ip saddr != { v4 } counter drop
		add(etherType(etherIPv4), []expr.Any{load(expr.PayloadBaseNetworkHeader, 12, 4), b.notIn(nftables.TypeIPAddr, v4)}, counterDrop())
	}
	// ether type ip6 ip6 saddr != fe80::/10 ip6 saddr != { v6, :: } counter drop
	add(etherType(etherIPv6), []expr.Any{
		load(expr.PayloadBaseNetworkHeader, 8, 16),
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 16,
			Mask: append([]byte{0xff, 0xc0}, make([]byte, 14)...), Xor: make([]byte, 16)},
		cmp(expr.CmpOpNeq, append([]byte{0xfe, 0x80}, make([]byte, 14)...)),
		load(expr.PayloadBaseNetworkHeader, 8, 16), b.notIn(nftables.TypeIP6Addr, v6),
	}, counterDrop())
	// ether type != { arp, ip, ip6 } counter drop
	add([]expr.Any{load(expr.PayloadBaseLLHeader, 12, 2), b.notIn(nftables.TypeEtherType, [][]byte{etherARP, etherIPv4, etherIPv6})}, counterDrop())

	if b.err != nil {
		return fmt.Errorf("failed to build the rules of %s: %w", chain.Name, b.err)
	}
	for _, exprs := range rules {
		b.c.AddRule(&nftables.Rule{Table: b.table, Chain: chain, Exprs: exprs})
	}
	return nil
}

// setIDs serialises addSet.
var setIDs sync.Mutex

// addSet is c.AddSet. google/nftables v0.3.0 numbers the sets of a batch
// (the IDs rules look anonymous sets up by) from a package counter without
// a lock, so that concurrent Applies in one process could give two sets of
// one batch the same ID.
func addSet(c *conn, s *nftables.Set, elems []nftables.SetElement) error {
	setIDs.Lock()
	defer setIDs.Unlock()
	return c.AddSet(s, elems)
}

// ifnameKey is name as a key of the ports map (type ifname): IFNAMSIZ
// bytes, zero padded.
func ifnameKey(name string) []byte {
	k := make([]byte, unix.IFNAMSIZ)
	copy(k, name)
	return k
}

// verdictOf decodes the data of a verdict map element as google/nftables
// v0.3.0 returns it (SetElement.Val: the attributes of the verdict): its
// code and the chain it jumps or goes to.
func verdictOf(val []byte) (code int32, chain string, err error) {
	ad, err := netlink.NewAttributeDecoder(val)
	if err != nil {
		return 0, "", err
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_VERDICT_CODE:
			code = int32(ad.Uint32())
		case unix.NFTA_VERDICT_CHAIN:
			chain = ad.String()
		}
	}
	return code, chain, ad.Err()
}
