// Package bridge ensures the node bridges the fast virtio-net path switches in
// (docs/design.md §2, §3): a Linux bridge through netlink, or an Open vSwitch bridge
// through OVSDB with a configurable datapath_type ("system" on real nodes,
// "netdev", the userspace datapath, where the openvswitch kernel module is
// missing). Ensure is level-based and idempotent: it creates a missing bridge,
// sets its MTU and brings it up, and reads back what the kernel or
// ovs-vswitchd applied; calling it again (in the same process or after a
// restart) changes nothing and never duplicates a bridge.
//
// Nothing here deletes a bridge. A bridge the agent created carries a marker
// (the Linux link alias, or an OVS Bridge external_ids key) so that Managed can
// list the agent's bridges that no FastPathNetwork names any more; the agent reports
// them and leaves them in place, because they may still carry traffic.
package bridge
