// Package dhcp is the node agent's DHCPv4 responder on its Linux bridges:
// it hands a guest on a fast-path interface the address the fastpath CNI
// plugin's IPAM gave the attachment, because KubeVirt serves DHCP only for
// its bridge and masquerade bindings, not for binding plugins such as
// Fastpath's managedTap one (KubeVirt v1.7.0 pkg/network/setup/podnic.go,
// newDHCPConfigurator). OVN-Kubernetes answers its managedTap networks with
// OVN's native DHCP the same way.
//
// The answers come from the plugin's lease records (internal/node/leases):
// a DISCOVER or REQUEST from a MAC with no record on that bridge gets no
// answer; a REQUEST for another address than the recorded one gets a NAK.
// The leases are static, so RELEASE and DECLINE change nothing.
//
// A lease is answered only while its allocator holds its address for its
// attachment (issue 39, item 4: one allocator per network on a node, and
// DHCP answering from it): before every OFFER, ACK or NAK the responder
// reads host-local's file of the address in the directory the lease names
// (<stateDir>/ipam/fpnet-<bridge>) and compares its owner with the lease's
// container ID and ifname (allocator.go). A lease whose address is
// reserved for nobody or for another attachment gets no answer, is counted
// in Stats.Unconfirmed and logged once per lease and holder every ten
// minutes. A lease of another IPAM plugin, and one written before leases
// named their allocator whose candidate directories do not exist, are
// answered unchecked (logged the same way).
//
// A Responder reads and writes frames through an AF_PACKET socket on the
// bridge (github.com/mdlayher/packet, with a BPF filter that lets only UDP
// to port 67 reach it), framed by github.com/insomniacslk/dhcp's nclient4
// raw UDP conn and served by its server4. So the bridge needs no IPv4
// address and nothing binds UDP port 67: the agent needs CAP_NET_RAW and
// not CAP_NET_BIND_SERVICE, and a DHCP server the node runs itself on port
// 67 is not disturbed. Replies go to the client's MAC (not the Ethernet
// broadcast), so other guests on the bridge do not see them.
package dhcp
