package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// Names shared by the operator, the node agent and the domain hook. What the
// CNI plugin must agree on too is in package api/wellknown.
const (
	// Finalizer is set on every FastPathAttachment so the operator can remove its
	// wiring from the VMs before the attachment goes away.
	Finalizer = "fastpath.io/finalizer"

	// FieldManager is the server-side apply field manager of the operator. Every
	// field it sets on objects it does not own (KubeVirt VMs) is owned by it, so the
	// user's fields survive and ours can be removed cleanly.
	FieldManager = "fastpath-operator"

	// AttachmentLabel is set on a VM template (and so on its virt-launcher pod) to
	// the attachment name; placement affinity selects on it.
	AttachmentLabel = "fastpath.io/attachment"

	// TuningAnnotation on a VM template carries the domain hook's tuning (JSON,
	// docs/design.md §3.1): {"interfaces": {"<network name>": {...}}}.
	TuningAnnotation = "fastpath.io/tuning"

	// VSOCKModeAnnotation on a VM template says the VM's vsock mode when it is
	// Sibling ("Sibling"): the domain hook then gives the domain a vhost-user-vsock
	// device on SiblingSocketPath instead of KubeVirt's kernel <vsock>.
	VSOCKModeAnnotation = "fastpath.io/vsock-mode"

	// VhostUserVSOCKNodeLabel is set to "true" on a Node by the node agent
	// while it runs there with the vhost-user vsock backend (FastPathNode
	// capabilities.vhostUserVSOCK), and removed when it runs without it. The
	// operator puts it into the nodeSelector of the VMs of an attachment in
	// vsock mode Sibling, so the scheduler keeps them on nodes that can serve
	// them.
	VhostUserVSOCKNodeLabel = "fastpath.io/vhost-user-vsock"

	// SiblingSocketDir is the node directory holding the vhost-user sockets of
	// the agent's vhost-device-vsock backends (mode Sibling); the device plugin
	// mounts it into virt-launcher's compute container at the same path.
	SiblingSocketDir = "/var/run/fastpath/vsock"

	// MinSiblingCID and MaxSiblingCID bound the CIDs the operator allocates in
	// a Sibling group. A group lives in one vhost-device-vsock process, so its
	// CIDs cannot clash with KubeVirt's kernel CIDs or another group's; 3 is the
	// first guest CID (0-2 are reserved by linux/vm_sockets.h).
	MinSiblingCID = 3
	MaxSiblingCID = 65535

	// WiringRecordAnnotation on a VM's own metadata holds the record of what the
	// operator changed in the VM's template (JSON, internal/vm/wiring.Record), so
	// that unwiring restores the template byte for byte. Do not edit it.
	WiringRecordAnnotation = "fastpath.io/wiring"

	// NetworkNamePrefix prefixes the VM network and interface names: fp-<attachment>.
	NetworkNamePrefix = "fp-"

	// MacvtapResourceDomain is the domain of the extended resources the node
	// agent's device plugin offers on datapath Macvtap, one per lower device:
	// macvtap.fastpath.io/<FastPathNetwork spec.bridge>. The operator names it
	// in the NetworkAttachmentDefinition's NADResourceNameAnnotation, KubeVirt
	// then requests one per interface for virt-launcher's compute container,
	// and kubelet gives that container the /dev/tapN of the allocated device.
	MacvtapResourceDomain = "macvtap.fastpath.io"

	// SiblingResourceDomain is the domain of the extended resource that brings a
	// VM's vhost-user-vsock socket (mode Sibling) into virt-launcher's compute
	// container: SiblingResourceName.
	SiblingResourceDomain = "vsock.fastpath.io"

	// SiblingResourceName is the extended resource the node agent's device
	// plugin offers while it runs with the vhost-user vsock backend. The
	// operator puts spec.domain.resources.limits[SiblingResourceName]: "1" into
	// the template of every VM in mode Sibling; KubeVirt copies it to the
	// compute container, kubelet allocates one device, and the device plugin
	// mounts a directory holding only that VM's SiblingSocketPath socket at
	// SiblingSocketDir (internal/node/deviceplugin SiblingMounts).
	SiblingResourceName = SiblingResourceDomain + "/sibling"

	// SiblingAllocDir is the subdirectory of SiblingSocketDir holding one
	// directory per device of SiblingResourceName ("<SiblingSocketDir>/alloc/<device ID>"),
	// each mounted into at most one container.
	SiblingAllocDir = "alloc"

	// NADResourceNameAnnotation on a NetworkAttachmentDefinition names the
	// extended resource a pod on that network needs (Multus and KubeVirt read
	// it; Multus passes the allocated device ID to the CNI plugin as the
	// netconf key "deviceID").
	NADResourceNameAnnotation = "k8s.v1.cni.cncf.io/resourceName"

	// HostCID is the vsock context ID of the host (VMADDR_CID_HOST, linux/vm_sockets.h):
	// guests dial the relay at CID 2.
	HostCID = 2
)

// SiblingSocketPath returns the vhost-user socket of VM namespace/vm in mode
// Sibling: SiblingSocketDir/<first 16 hex digits of sha256("<namespace>/<vm>")>.vhost.
// A hash keeps the path under the 108-byte sun_path limit for any VM name;
// the agent (which serves it) and the domain hook (which points QEMU at it)
// both compute it from the VM's namespace and name, so nothing per VM has to
// be written into the VM.
func SiblingSocketPath(namespace, vm string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + vm))
	return SiblingSocketDir + "/" + hex.EncodeToString(sum[:8]) + ".vhost"
}

// MacvtapResourceName returns the extended resource of the macvtap lower
// device lower: "macvtap.fastpath.io/<lower>".
func MacvtapResourceName(lower string) string { return MacvtapResourceDomain + "/" + lower }

// NetworkName returns the VM network and interface name of an attachment:
// "fp-<attachment>". It names the network inside one VM; the CNI network
// name on the node is CNINetworkName.
func NetworkName(attachment string) string { return NetworkNamePrefix + attachment }

// cniNetworkHashLen is the number of hex digits of sha256 in a hashed
// CNINetworkName: 128 bits.
const cniNetworkHashLen = 32

// CNINetworkName returns the CNI network name (the netconf "name") of the
// attachment namespace/attachment: "fp-<namespace>.<attachment>", or, when
// that is longer than wellknown.MaxNetworkNameLen (the plugin's limit), "fp-<namespace>-<first 32 hex
// digits of sha256("<namespace>/<attachment>")>".
//
// It is unique per namespace, so that two namespaces' attachments of one
// name never share what the node keys by network name: the scope of a CNI
// GC, the plugin's records. (host-local's directory is keyed by the bridge,
// netconf.IPAMNetworkName: one allocator for the network on the node.)
// A namespace is a DNS label (no "."), so the first "." splits the short
// form unambiguously; the hashed form has no "." and so never equals a short
// one.
func CNINetworkName(namespace, attachment string) string {
	if name := NetworkNamePrefix + namespace + "." + attachment; len(name) <= wellknown.MaxNetworkNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(namespace + "/" + attachment))
	return NetworkNamePrefix + namespace + "-" + hex.EncodeToString(sum[:])[:cniNetworkHashLen]
}
