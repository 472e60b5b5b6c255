// Package cnitest holds what the fastpath CNI plugin's datapath tests and
// benchmark share: building the plugin and a CNI 1.1-capable host-local,
// choosing CNI_PATH per spec version, making a node bridge of either
// datapath, network namespaces, netconfs, and reading back what is left on
// the node (bridge ports, IPAM allocations) to prove nothing leaked.
//
// Everything here runs as root against the real kernel and Open vSwitch.
package cnitest
