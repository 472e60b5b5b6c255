// Package testutil holds helpers shared by the project's tests: the root
// requirement of datapath tests (RequireRoot), unique names for the network
// namespaces, links and bridges a test creates (UniqueName), and Open vSwitch
// for tests that need a real OVSDB and ovs-vswitchd (StartOVS, AddOVSBridge).
//
// StartOVS is internal/datapath/ovsrun shared by the tests of one process: it
// takes the machine-wide lock so that test binaries running in parallel (and
// the local node benchmark) use OVS one at a time, starts Debian's
// openvswitch-switch with ovs-ctl when it is not already running, and stops
// it again at the last cleanup when it started it. AddOVSBridge makes a
// bridge with the userspace datapath (datapath_type=netdev): the kernels
// these tests run on may lack the openvswitch module, and ovs-vswitchd then
// switches between veth ports through AF_PACKET.
package testutil
