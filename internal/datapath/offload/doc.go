// Package offload switches and reads the offloads of wellknown.Offloads
// (TSO, GSO, GRO, checksum offload) of a network interface through the ethtool ioctl
// (ETHTOOL_GFEATURES/SFEATURES, with buffers sized to the device; ioctl.go
// says why not github.com/safchain/ethtool), the way `ethtool -K` does. Both veth ends of
// a fastpath attachment get the netconf "offloads"; the ESX networking study
// measured TSO alone as worth up to 2x throughput (docs/design.md §1).
//
// The ioctl acts on the network namespace of the calling thread: call these
// functions inside ns.Do for a container interface.
package offload
