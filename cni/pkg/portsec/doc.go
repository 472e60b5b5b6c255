// Package portsec is port security on the Linux bridge datapath: an
// attachment's bridge port (the host end of its veth pair) forwards only
// frames whose source MAC is the attachment's and whose ARP, IPv4 and IPv6
// source addresses are the ones IPAM gave it, so a guest cannot pose as a
// neighbour on the node-local network (issue 24 item 6).
//
// The rules live in one nftables table of the bridge family on the node,
// "fastpath" (TableName): a base chain on the prerouting hook dispatches on
// the input interface through a verdict map ("ports") to one chain per
// port ("port-<host interface>"), which drops, with a counter, whatever that
// port may not send. Ports without an entry are not filtered.
//
// The plugin writes each change as one nftables transaction, a netlink
// batch through github.com/google/nftables, from its own process: no nft
// binary on the node and no process per ADD or DEL. An ADD on a node that
// has the table reads the base chain and sends a batch that only creates
// objects (see Apply): one that changes or deletes existing ones makes
// the kernel wait for an RCU grace period when the socket is closed.
// Port.Rules gives the same rules in nft syntax, as nft lists them; the
// tests hold the two to each other.
package portsec
