// Package state keeps what the fastpath CNI plugin must remember between
// invocations: one JSON file per attachment (container ID + ifname) written
// at ADD and read by DEL, CHECK and GC, and the node-wide lock that makes
// concurrent invocations safe.
//
// Layout under the state directory (netconf "stateDir", default
// /var/lib/cni/fastpath):
//
//	lock                                flock(2) target (node lock) and OFD
//	                                    byte-range locks (one per attachment), never removed
//	<containerID>:<ifname>.json         one Attachment per line: the record ADD
//	                                    saves first and, appended once ADD
//	                                    succeeded, the completed one; the last
//	                                    whole line counts
//	.tmp-<containerID>:<ifname>.json    the same while Save writes it; removed by
//	                                    Save, Delete, or SweepTemp when a kill stranded it
//	leases/                             the DHCP leases of datapath LinuxBridge for the
//	                                    node agent (internal/node/leases), not this package's
//
// Neither a CNI container ID ([a-zA-Z0-9_.-]) nor an interface name may
// contain ':', so the file name is unambiguous.
package state
