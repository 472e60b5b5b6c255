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
// port may not send. Ports without an entry are not filtered. The plugin
// writes each change as one nftables transaction with the nft binary
// (nft -f -), which the node must have: one execution per ADD and per DEL
// once the node has the table. sigs.k8s.io/knftables, which
// containernetworking/plugins' portmap uses, would do the same with two
// more nft runs per call to probe the binary, and a CNI ADD runs once per
// VM start. An ADD's transaction only creates objects (see Apply): one that
// changes or deletes existing ones makes nft wait for an RCU grace period
// when it exits.
package portsec
