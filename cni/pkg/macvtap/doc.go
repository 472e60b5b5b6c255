// Package macvtap is the Macvtap datapath of the fastpath CNI plugin: it
// creates an attachment's interface as a bridge-mode macvtap on the node-local
// lower device directly in the pod's network namespace (optionally with the
// interface index a device ID names, which fixes its /dev/tapN), checks and
// deletes it, all through netlink. Frames between two macvtaps of one lower
// device are switched by the kernel's macvlan code, with no veth and no
// bridge (docs/design.md §2). It never creates the lower device; the node
// agent (fastpath-agent) does.
package macvtap
