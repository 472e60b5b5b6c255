// Package ovs is the Open vSwitch datapath of the fastpath CNI plugin. It
// talks OVSDB (RFC 7047) through libovsdb with the model of
// internal/datapath/ovsdb, which it shares with the node agent, and monitors only the
// Open_vSwitch, Bridge, Port and Interface columns it uses. It adds the host
// end of an attachment's veth pair as a port of the node bridge with
// external_ids naming the attachment (the Key* constants), waits for
// ovs-vswitchd to open it, and finds and removes such ports again.
//
// It never creates bridges; the node agent (fastpath-agent, through
// internal/datapath/ovsdb) does. On a kernel without the openvswitch module the
// bridge uses the userspace datapath (datapath_type=netdev), whose veth
// ports OVS drives through AF_PACKET.
package ovs
