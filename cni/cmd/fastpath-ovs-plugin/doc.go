// Command fastpath-ovs-plugin is the fastpath CNI plugin with every datapath,
// Open vSwitch included. The runtime executes bin/fastpath (the
// netconf "type"), which hands every invocation that needs OVSDB over to
// this binary, installed beside it; run directly it behaves the same way.
// See package github.com/fastpath-io/fastpath/cni/pkg/datapath for why the
// plugin is two binaries.
package main
