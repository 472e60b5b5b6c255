// Package ovsdb is the node agent's small Open vSwitch database client: a
// libovsdb model of the Open_vSwitch, Bridge, Port and Interface columns the
// agent reads and writes (vswitch.ovsschema, RFC 7047), and the few
// operations it needs — read the switch's version and datapath types, create
// a bridge with its internal interface in one transaction, set a bridge's
// datapath_type and its internal interface's mtu_request, and read back what
// ovs-vswitchd applied.
//
// It is separate from the CNI plugin's cni/pkg/ovs (which adds and removes
// ports and never creates bridges) because the agent needs columns that model
// lacks (ovs_version, datapath_types, Bridge external_ids) and the CNI binary
// should not carry the agent's bridge management.
package ovsdb
