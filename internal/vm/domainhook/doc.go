// Package domainhook is the logic of fastpath-domain-hook, the KubeVirt
// onDefineDomain hook that applies a fast-path interface's virtio tuning to the
// libvirt domain XML before virt-launcher defines the domain (docs/design.md §3).
//
// # The sidecar-shim contract
//
// KubeVirt's sidecar-shim (kubevirt/kubevirt cmd/sidecars/sidecar_shim.go,
// v1.6.0, runOnDefineDomain) looks up an executable named "onDefineDomain" on
// $PATH and runs it as
//
//	exec.Command("onDefineDomain", "--vmi", string(vmiJSON), "--domain", string(domainXML))
//
// so argv[0] is "onDefineDomain", the VMI arrives as JSON and the domain as the
// XML that virt-launcher marshalled from its own DomainSpec struct
// (pkg/hooks/manager.go: xml.MarshalIndent with a tab indent). The whole of
// stdout (command.Output()) becomes the new domain XML; stderr is logged
// line by line by the shim ("hook": "onDefineDomain"). A non-zero exit fails
// the gRPC OnDefineDomain call and so the VMI start. virt-launcher passes the
// returned string unchanged to libvirt's DomainDefineXML
// (pkg/virt-launcher/virtwrap/util/libvirt_helper.go, SetDomainSpecStrWithHooks),
// which is why attributes KubeVirt's own structs do not model (rx_queue_size,
// <host>, <guest>) survive.
//
// # What is edited
//
// The tuning comes from the VMI annotation fastpath.io/tuning (package
// internal/vm/domaintuning), keyed by VM network name. KubeVirt gives each domain
// interface the alias "ua-<interface name>" and the interface name is the
// network name, so the tuning of network N applies to the <interface> whose
// <alias name='ua-N'/>. On that interface the hook sets
//
//	<driver name='vhost' queues='Q' rx_queue_size='R' tx_queue_size='T'>
//	  <host csum= gso= tso4= tso6= ecn=/>
//	  <guest csum= tso4= tso6= ecn=/>
//	</driver>
//	<mtu size='M'/>
//
// Only the attributes the tuning sets are written; every other element,
// attribute, comment and namespace of the domain is kept (see Apply).
//
// # Offload mapping
//
// libvirt's <driver><host/> attributes switch what the virtio device accepts
// from the guest (the guest's transmit side), <guest/> what the device may hand
// to the guest (its receive side); QEMU turns them into the virtio-net
// properties csum, gso, host_tso4, host_tso6, host_ecn and guest_csum,
// guest_tso4, guest_tso6, guest_ecn (libvirt formatdomain "Setting NIC
// driver-specific options"; QEMU hw/net/virtio-net.c virtio_net_properties).
//
// Which attributes an offload sets is its row of wellknown.Offloads (Host,
// Guest); docs/domain-hook.md ("Offloads") has the table with the virtio
// feature bits and what a Linux guest shows, and why each offload maps as it
// does. The hook writes the attributes in libvirt's own order
// (libvirtAttrOrder). ufo and mrg_rxbuf are left to QEMU's defaults (UFO was
// removed from Linux in 4.14 and survives only for old guests; mergeable rx
// buffers are on by default, which jumbo frames want).
//
// The virtio specification (1.2 §5.1.3.1) makes HOST_TSO*, HOST_ECN and GSO
// depend on CSUM and GUEST_TSO* on GUEST_CSUM (virtioNeeds). The hook writes
// what the tuning says and reports, on stderr, an offload On whose attributes
// need one another offload sets Off (the guest ignores it), and the legacy GSO
// bit re-enabling TSO (gso On with tso Off).
//
// # Checks
//
// Before anything is written the tuning is validated: domaintuning.Parse checks
// ranges (mtu 1280-65535, queues 1-256, ring sizes 256|512|1024) and the hook
// adds the vhost-net limit txQueueSize == 256 (QEMU only grows the tx ring for
// vhost-user) and that a tuned interface has a virtio model. Queues are capped
// at the domain's vCPUs (KubeVirt's multiqueue uses one queue pair per vCPU
// and has no cap of its own). An MTU above the one KubeVirt copied from the pod
// interface is lowered to it, because the tap device and the bridge port
// behind it would drop larger frames. Any error means no output at all.
package domainhook
