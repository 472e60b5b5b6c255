// Package ovs is the Open vSwitch datapath of the fastpath CNI plugin. It
// talks OVSDB (RFC 7047) through libovsdb with a hand-written model of the
// few Open_vSwitch, Bridge, Port and Interface columns it uses, adds the host
// end of an attachment's veth pair as a port of the node bridge with
// external_ids naming the attachment, and finds and removes such ports again.
//
// It never creates bridges; the node agent (fastpath-agent) does. On a kernel
// without the openvswitch module the bridge uses the userspace datapath
// (datapath_type=netdev), whose veth ports OVS drives through AF_PACKET.
package ovs
