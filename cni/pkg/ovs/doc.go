// Package ovs is the Open vSwitch datapath of the fastpath CNI plugin: the
// host end of an attachment becomes a port of an OVS bridge, through the
// OVSDB client the node agent uses too (internal/datapath/ovsdb, libovsdb).
//
// Only bin/fastpath-ovs-plugin links it (see package datapath for why):
// bin/fastpath, which the runtime executes, hands every invocation that needs
// OVSDB over to that binary.
package ovs
