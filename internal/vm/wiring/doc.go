// Package wiring adds one FastPathAttachment's wiring to a KubeVirt
// VirtualMachine and removes it again, as pure functions over the VM's
// unstructured JSON (map[string]any as decoded by client-go).
//
// # What is wired
//
// Under spec.template of a VM selected by attachment <a> (docs/design.md §3.1, issue 3):
//
//   - spec.networks[]: {"name": "fp-<a>", "multus": {"networkName": "<nad>"}}
//   - spec.domain.devices.interfaces[]: {"name": "fp-<a>", "bridge": {}, "model": "virtio"}
//     (datapath Macvtap: "binding": {"name": "macvtap"} instead of "bridge", KubeVirt's
//     macvtap network binding plugin; see Network.Binding)
//   - spec.domain.devices.networkInterfaceMultiqueue: true when queues > 1
//   - spec.domain.devices.autoattachVSOCK: true when vsock services are declared
//     in mode Relay (KubeVirt's kernel vsock device)
//   - metadata.annotations["fastpath.io/vsock-mode"]: "Sibling" when vsock
//     services are declared in mode Sibling (the domain hook adds a
//     vhost-user-vsock device; docs/vsock-sibling.md)
//   - spec.nodeSelector["fastpath.io/vhost-user-vsock"]: "true" in mode
//     Sibling: the node agent sets that label on nodes where it runs the
//     vhost-user backend, so such VMs are scheduled only there
//   - spec.domain.resources.limits["vsock.fastpath.io/sibling"]: "1" in mode
//     Sibling: KubeVirt copies it to the compute container and the agent's
//     device plugin mounts the VM's vhost-user socket there
//   - metadata.labels["fastpath.io/attachment"]: "<a>" (selected by the pod affinity)
//   - metadata.annotations["fastpath.io/tuning"]: the tuning of package tuning
//   - metadata.annotations["hooks.kubevirt.io/hookSidecars"]: one entry
//     {"args":["--version","v1alpha3"],"image":"<domain hook image>"} appended to
//     the user's list, when the operator has a domain hook image and the
//     attachment a network or vsock mode Sibling (see "The hook sidecar annotation" below)
//   - spec.affinity.podAffinity.{required,preferred}DuringSchedulingIgnoredDuringExecution[]:
//     one term with topologyKey kubernetes.io/hostname selecting the label above
//     (placement Required, or Preferred with weight 100)
//
// # Why read-modify-write and not server-side apply
//
// KubeVirt's VirtualMachine CRD declares no x-kubernetes-list-type on
// interfaces, networks or the affinity term lists, so server-side apply treats
// them as atomic: applying "our interface" would either conflict with the
// user's field manager or, forced, replace the user's whole list with ours.
// The operator therefore edits exactly its own entries in a copy of the object
// it read (insert or remove by name, the user's entries untouched and in
// order) and sends the difference as a JSON merge patch that carries the
// resourceVersion it read (optimistic concurrency: a concurrent change makes
// the patch fail with 409 Conflict and the operator re-reads and retries),
// under the field manager fastpath-operator. Maps and scalars travel in the
// same patch, so a VM costs one request.
//
// The price of atomic lists is paid by users who manage their VMs with
// server-side apply: after the operator changed the interfaces list, the list
// is owned by fastpath-operator, and re-applying a manifest that changes it
// needs --force-conflicts. That replaces the list without our entry; the VM
// update wakes the operator, which appends its entry again (the record still
// says it is ours). Client-side kubectl apply and edits behave the same way
// without the conflict.
//
// # Why unstructured JSON and not kubevirt.io/api types
//
// Decoding a VM into kubevirtv1.VirtualMachine and encoding it again is not
// an identity: with kubevirt.io/api v1.6.0 a template
// {"spec":{"domain":{"resources":{"requests":{"memory":"1024Mi","cpu":"1.5"}}},"futureField":1}}
// comes back with "template.metadata":{} added, the quantities rewritten to
// "1Gi" and "1500m", and futureField (a field of a newer KubeVirt) dropped.
// Sending that would rewrite the user's fields, so the wiring works on the
// JSON the API server returned and touches nothing else.
//
// # Restoring exactly
//
// Some of what the operator sets may already be there: a user may have set
// networkInterfaceMultiqueue: false, or the template may have had no labels map
// at all. Wire writes a record of what it changed into the VM's metadata
// annotation RecordAnnotation ("fastpath.io/wiring"): the entries it added,
// the previous value (or absence) of every scalar it set, every container
// (map or list) it had to create and its hook sidecar entry with the
// annotation's value before and after. Unwire follows the record: it removes the
// added entries, restores each scalar, deletes each created container that is
// empty again and finally the record itself, so the VM's spec after Unwire is
// byte for byte the spec before Wire. A value the user already had (an equal
// affinity term, the label or node selector with our value) is not recorded
// as ours and is left in place by Unwire.
//
// # The hook sidecar annotation
//
// KubeVirt reads hooks.kubevirt.io/hookSidecars as a JSON list inside a string
// (kubevirt/kubevirt v1.6.0 pkg/hooks/hooks.go, UnmarshalHookSidecarList) and
// adds one sidecar container per entry to the virt-launcher pod; the domain
// hook runs as onDefineDomain in one of them (docs/domain-hook.md). The value
// is one string, so neither a merge patch nor server-side apply can add an
// entry to it: the operator edits the string. It appends its entry after the
// last one by splicing the text, so every byte of the user's entries, and the
// whitespace between them, stays as it was; an entry the user already has with
// the same image does the job and stays theirs.
//
// The Record keeps the value before (or its absence) and the value written.
// While the annotation still equals what was written, Unwire puts the value
// before back exactly (or deletes the annotation); if the user changed it in
// the meantime, Unwire cuts out only the operator's entry (the last one with
// its image) and leaves the rest of the user's text alone. If the user removed
// the entry, Wire appends it again and records the user's value as the one to
// restore.
//
// A value that is not a JSON list of hook sidecar objects (what KubeVirt's
// decoder accepts, except JSON null) is never rewritten: Wire reports a
// *ConflictError naming spec.template.metadata.annotations["hooks.kubevirt.io/hookSidecars"]
// and changes nothing, and Unwire fails with the same words and changes
// nothing, keeping the Record until the user repairs the value.
//
// The record is the operator's memory: deleting it by hand makes the
// operator's own entries look like the user's, which is then reported as a
// conflict and never overwritten. A record naming an attachment that no longer
// exists (its finalizer removed by force) is unwired by the next attachment
// that selects the VM, before it wires its own.
//
// The record also tells which attachment wired a VM, which the operator needs to
// unwire VMs that stopped matching a selector and to resolve two attachments
// selecting one VM (at most one attachment wires a VM: the template label
// fastpath.io/attachment has one value).
package wiring
