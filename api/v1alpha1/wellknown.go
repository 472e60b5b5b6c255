package v1alpha1

// Names shared by the operator, the node agent, the CNI plugin and the domain hook.
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

	// WiringRecordAnnotation on a VM's own metadata holds the record of what the
	// operator changed in the VM's template (JSON, internal/vm/wiring.Record), so
	// that unwiring restores the template byte for byte. Do not edit it.
	WiringRecordAnnotation = "fastpath.io/wiring"

	// NetworkNamePrefix prefixes the VM network and interface names: fp-<attachment>.
	NetworkNamePrefix = "fp-"

	// CNIType is the "type" of the fastpath CNI netconf (the binary's name).
	CNIType = "fastpath"

	// HostCID is the vsock context ID of the host (VMADDR_CID_HOST, linux/vm_sockets.h):
	// guests dial the relay at CID 2.
	HostCID = 2
)

// NetworkName returns the VM network and interface name of an attachment:
// "fp-<attachment>".
func NetworkName(attachment string) string { return NetworkNamePrefix + attachment }
