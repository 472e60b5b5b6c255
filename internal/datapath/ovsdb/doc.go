// Package ovsdb is fastpath's one model of the Open vSwitch database
// (vswitch.ovsschema, RFC 7047) for libovsdb, and the node agent's client of
// it.
//
// model.go holds the Open_vSwitch, Bridge, Port and Interface columns that
// the node agent and the CNI plugin (cni/pkg/ovs) use. dial.go holds what
// both share: Dial connects and monitors the columns its caller names (each
// monitors only its own), LookupBridge, LookupPort and LookupInterface read
// a row by name from the cache, and Transact runs and checks a transaction.
//
// client.go is the agent's client on top of these: read the switch's
// version and datapath types, create a bridge with its internal interface
// in one transaction, set a bridge's datapath_type and its internal
// interface's mtu_request, read back what ovs-vswitchd applied, and (Conn)
// connect lazily and reconnect. Port management stays in cni/pkg/ovs: the
// plugin adds and removes ports and never creates bridges.
package ovsdb
