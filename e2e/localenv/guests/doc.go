// Package guests boots REAL virtual machines for the local environment: the
// guests of the emulated virt-launchers (internal/emulation) when the demo or
// the e2e suite run with real guests, and the package's own root tests.
//
// What is REAL here: libvirt (libvirtd 9.0 with virtlogd, one pair per
// launcher network namespace, in a private mount namespace with its own
// /run/libvirt, as virtqemud runs inside a virt-launcher pod), QEMU 7.2
// (TCG: /dev/kvm does not boot guests on these machines, so the domain type
// is 'qemu'), the guest kernel (Debian's cloud kernel from its .deb) and
// its virtio-net and vsock drivers, the taps in the launcher namespace that
// QEMU opens, DHCP on those taps (github.com/krolaw/dhcp4, the library
// virt-launcher uses) answered to the guest's udhcpc, the domain hook
// binary (bin/fastpath-domain-hook, called as the sidecar-shim calls
// onDefineDomain), virt-xml-validate, and vhost-device-vsock (one process
// per guest; never given --forward-cid or --forward-listen).
//
// What is EMULATED: the domain is rendered by this package the way KubeVirt
// v1.6's converter renders it (ConvertDomain) rather than by virt-launcher
// itself; the guest boots a kernel directly; and the node lacks vhost-net and
// vhost-vsock, so AdjustForNode switches a 'vhost' interface driver to
// QEMU's userspace virtio-net and replaces the kernel <vsock> device by a
// vhost-user-vsock device — each change is reported and printed.
//
// The guest reports from inside (hack/guest/init): one console line per NIC
// with what its virtio-net driver got (MTU, ethtool -g rx/tx ring sizes,
// ethtool -l combined queues, ethtool -k TSO, the DHCP address) and one with
// every top-level ethtool -k feature (NIC.Features), then a ready line; a virtio-serial port (flow-controlled, unlike a UART) is a
// control channel that runs commands in the guest (Guest.Run): ping, netperf, socat. Guest.ServeSink,
// Guest.Stream and CompareStreams time byte streams between guests (dd into
// socat, ended by the sink's count of what arrived) over vsock or TCP, the
// demo's and the tests' VSOCK_STREAM comparison; Guest.ServeChecksumSink
// and Guest.StreamChecksum move random bytes hashed by sha256 in both
// guests. Guest.Reboot reboots a guest from inside and waits until it is
// back and its control channel answers. Guest.Stop removes
// everything a guest made: domain, QEMU, libvirtd, virtlogd,
// vhost-device-vsock, DHCP servers, taps and sockets.
package guests
