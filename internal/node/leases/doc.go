// Package leases is the hand-over from the fastpath CNI plugin to the node
// agent's DHCPv4 responder (internal/node/dhcp): what a guest on a fast-path
// interface of datapath LinuxBridge must be told (its MAC, IPv4 address and
// prefix, gateway, MTU), one small JSON file per attachment, and which
// allocator holds the address (the IPAM plugin and the network name it was
// given), so that the responder answers only while that allocator still
// holds it for the attachment.
//
// Layout under the plugin's state directory (cni/pkg/state):
//
//	leases/<containerID>:<ifname>.json       one Lease, written whole (rename)
//	leases/.tmp-<containerID>:<ifname>.json  the same while Write writes it
//
// The names and the write by rename are internal/platform/recordfile's,
// which the plugin's own records (cni/pkg/state) use too.
//
// Only the plugin writes them (ADD, once the IPAM plugin answered) and
// removes them (DEL, GC, an ADD's rollback, the reclaim of an unfinished
// ADD) with the attachment's lock held, and GC, under the exclusive node
// lock, also those of stale attachments whose record was lost; the agent
// only reads them.
// A tenant influences its own record only through what its ADD is given
// (the MAC in CNI_ARGS, the IPAM plugin's answer), as for port security.
package leases
