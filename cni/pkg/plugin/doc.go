// Package plugin is the fastpath CNI plugin: the skel callbacks for ADD,
// CHECK, DEL, STATUS and GC (CNI 0.3.1, 0.4.0, 1.0.0 and 1.1.0) and the
// dispatcher that hands the bridge side of an attachment to the datapath the
// netconf names (package linuxbridge or package ovs).
//
// An attachment is a veth pair: the container end, named CNI_IFNAME, in the
// pod's network namespace, and the host end, named by HostIfName, on the node
// bridge. Both ends get the netconf MTU and offloads; addresses come from the
// delegated IPAM plugin. ADD records the attachment in the state directory
// (package state) so that DEL and GC can undo it without the netns, and
// rolls back everything it did when a step fails.
//
// stdout carries only the CNI result (or error); logs go to stderr.
package plugin
