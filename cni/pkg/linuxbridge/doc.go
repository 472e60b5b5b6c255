// Package linuxbridge holds the netlink look-ups of the LinuxBridge datapath
// of the fastpath CNI plugin: it finds the node's Linux bridge, checks that a
// host veth is its port and lists its ports (package plugin enslaves the
// host end, with datapath.HostEnd.SetLink). It never creates bridges; the
// node agent (fastpath-agent) does.
package linuxbridge
