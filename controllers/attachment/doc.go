// Package attachment is the FastPathAttachment reconciler of fastpath-operator
// (issue 3, docs/design.md §3): it turns an attachment into a Multus
// NetworkAttachmentDefinition, wires the selected KubeVirt VirtualMachines'
// templates to it, allocates vsock relay ports and reports what the VMIs,
// their nodes and the node agents say in the attachment's status.
//
// # Shape (Cluster API style)
//
// Reconcile gets the attachment, ensures the finalizer fastpath.io/finalizer,
// defers one status patch (skipped when nothing changed; Events on condition
// transitions; metrics), branches on deletion and runs short phases over a
// scope, each a func(context.Context, *scope) (ctrl.Result, error) like those
// of the benchmark and node reconcilers. An error ends the reconcile; so does
// a phase that sets scope.stop, when the status says what blocks it and a
// watch brings the attachment back (a NAD of its name it does not own):
//
//	spec       defaults, checks what the CRD cannot (subnet vs --pod-network-cidr,
//	           tso without txChecksum, range order, a subnet overlapping an
//	           earlier attachment's on the same network: SubnetConflict):
//	           InvalidSpec, TerminalError
//	selection  VMs the selector matches, VMs still carrying our wiring, and the
//	           owner of each VM when attachments overlap; a vsock target that
//	           exists must be selected (InvalidSpec), one that does not exist
//	           yet is VSOCKReady=False/TargetNotFound, not an error
//	network    the NAD (same name, ownerReference, rendered netconf.NetConf)
//	wiring     wire / unwire VM templates (package wiring), one patch per VM;
//	           the fast-path interface uses Fastpath's network binding plugin
//	           (Options.Bindings), whose sidecar is the domain hook; while the
//	           KubeVirt CR does not register it, no VM is wired
//	           (VMsWired=False/BindingPluginNotRegistered)
//	observe    per-VM status from the VMI (node, interface, MAC, IPs, CID,
//	           restart needed, also when the VMI's interface is not on the
//	           binding plugin yet); Colocated
//	vsock      relay ports (stable, unique cluster-wide), routes with target and
//	           allowed CIDs; VSOCKReady (TargetNotFound, TargetNotRunning, NoCID)
//	nodes      FastPathNode Ready of every node running a member VM; NodesReady
//
// Deletion unwires every VM that carries this attachment's wiring record
// (found by a live list, not by the selector), deletes the NAD and removes the
// finalizer.
//
// # Writing VMs we do not own
//
// KubeVirt's interface, network and affinity lists are atomic for server-side
// apply, so the wiring is a read-modify-write of exactly our entries (package
// wiring explains the record that makes removal exact), sent as a JSON merge
// patch of the difference that carries the resourceVersion read
// (client.MergeFromWithOptimisticLock) under field manager fastpath-operator.
// The read comes from the informer cache; a 409 Conflict (a stale cache or a
// concurrent writer) re-reads the VM live and retries, so a VM costs one
// request when the cache is fresh. A VM whose template already carries the
// wiring is not written at all: a reconcile that changes nothing sends
// nothing, which is what keeps an operator restart invisible to the VMs.
//
// # Overlapping attachments
//
// One VM can carry one attachment's wiring (the template label
// fastpath.io/attachment has one value). Among the live attachments whose
// selectors match a VM, the oldest (creationTimestamp, then name) owns it; the
// others report VMsWired=False/VMConflict naming the VM and the owner, and an
// attachment that is no longer the owner unwires the VM so the owner can wire
// it. A VM that already has a user interface or network named fp-<attachment>
// is a VMConflict too, and nothing of the user's is overwritten.
//
// # Watches
//
// FastPathAttachment (For, and siblings in the namespace on spec changes, for
// ownership), NetworkAttachmentDefinition (by name), VirtualMachine
// (unstructured; by selector, wiring record, status and vsock service target,
// so a target created after the attachment brings it back),
// VirtualMachineInstance (by template label and status) and FastPathNode (by
// the nodes in status). No polling.
package attachment
