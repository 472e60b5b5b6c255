// Package linuxbridge is the LinuxBridge datapath of the fastpath CNI plugin:
// it finds the node's Linux bridge and enslaves the host end of an
// attachment's veth pair to it through netlink. It never creates bridges; the
// node agent (fastpath-agent) does.
package linuxbridge
