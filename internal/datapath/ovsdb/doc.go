// Package ovsdb is fastpath's one client of the Open vSwitch database
// (vswitch.ovsschema, RFC 7047), built on libovsdb. The node agent
// (fastpath-agent, through internal/datapath/bridge) and the CNI plugin
// (cni/pkg/plugin) both use it.
//
// model.go holds the Open_vSwitch, Bridge, Port and Interface columns the
// two use. dial.go connects and monitors them, reads a row by name from the
// cache and runs a checked transaction. client.go is what the agent needs:
// read the switch's version and datapath types, create a bridge with its
// internal interface in one transaction, set a bridge's datapath_type and
// its internal interface's mtu_request, wait (polling the cache with
// apimachinery's wait package) for what ovs-vswitchd applies, and (Conn)
// connect lazily and reconnect. ports.go is what the plugin needs: add the
// host end of an attachment's veth pair as a port with external_ids naming
// the attachment (the Key* constants), wait for ovs-vswitchd to open it,
// and find and remove such ports again. The plugin never creates bridges.
//
// On a kernel without the openvswitch module a bridge uses the userspace
// datapath (datapath_type=netdev), whose veth ports OVS drives through
// AF_PACKET.
package ovsdb
