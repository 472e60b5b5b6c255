// Package plugin is the fastpath CNI plugin: the skel callbacks for ADD,
// CHECK, DEL, STATUS and GC (CNI 0.3.1, 0.4.0, 1.0.0 and 1.1.0) and the one
// dispatcher (datapath.go) that maps netconf "datapath" to its
// datapath.Datapath: a veth pair on a Linux bridge (veth.go,
// linuxbridge.go) or on an Open vSwitch bridge (package ovs), or a macvtap
// (macvtap.go).
//
// On LinuxBridge and OVS an attachment is a veth pair: the container end,
// named CNI_IFNAME, in the pod's network namespace, and the host end, named
// by HostIfName, on the node bridge. On Macvtap it is a bridge-mode macvtap
// named CNI_IFNAME made directly in the pod's namespace. The interface gets
// the netconf MTU and offloads; addresses come from the delegated IPAM
// plugin. ADD records the attachment in the state directory (package state)
// so that DEL and GC can undo it without the netns, and rolls back
// everything it did when a step fails.
//
// stdout carries only the CNI result (or error); logs go to stderr.
package plugin
