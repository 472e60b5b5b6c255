// Package probe finds out what a node offers the fast paths (docs/design.md §3, §4):
// the kernel devices /dev/vhost-net (in-kernel virtio-net backend),
// /dev/vhost-vsock (virtio-vsock backend) and /dev/net/tun, the kernel
// release, and whether Open vSwitch answers on OVSDB, with its version and
// datapath types. Problems are explained in words an admin can act on
// ("vhost_vsock module not loaded: run modprobe vhost_vsock").
//
// The agent depends on the Prober interface; Host probes the real node and
// Static returns fixed capabilities for tests and the demo.
package probe
