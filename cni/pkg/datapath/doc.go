// Package datapath is the contract between the fastpath CNI plugin (package
// plugin) and the bridge side of an attachment: the Datapath interface that
// the Linux bridge and Macvtap datapaths (in package plugin) and the Open
// vSwitch one (package ovs) implement, and the errors they report alike.
//
// It exists so that the plugin binary that the runtime executes, bin/fastpath,
// can be built without the Open vSwitch datapath: package ovs pulls in
// libovsdb and with it prometheus, protobuf, klog and apimachinery, whose
// package initialisation and size add CPU to every ADD (the figure:
// docs/design.md §4.3). bin/fastpath hands an
// OVS invocation over to bin/fastpath-ovs-plugin, which has every datapath.
package datapath
