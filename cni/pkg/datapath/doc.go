// Package datapath is the contract between the fastpath CNI plugin's verbs
// (package plugin) and the datapaths: the Datapath interface, one
// implementation per netconf "datapath" (veth pairs on a bridge for
// LinuxBridge and OVS, a macvtap for Macvtap, all in package plugin); the
// Bridge interface of the switch a veth's host end joins (the Linux bridge
// in package plugin, Open vSwitch in package ovs); and the errors they
// report alike.
//
// It exists so that the plugin binary that the runtime executes, bin/fastpath,
// can be built without the Open vSwitch datapath: package ovs pulls in
// libovsdb and with it prometheus, protobuf, klog and apimachinery, whose
// package initialisation and size add CPU to every ADD (the figure:
// docs/design.md §4.3). bin/fastpath hands an
// OVS invocation over to bin/fastpath-ovs-plugin, which has every datapath.
package datapath
