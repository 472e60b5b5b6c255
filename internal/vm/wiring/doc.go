// Package wiring adds one FastPathAttachment's wiring to a KubeVirt
// VirtualMachine and removes it again, as pure functions over the VM's
// unstructured JSON (map[string]any as decoded by client-go).
//
// # What is wired
//
// Under spec.template of a VM selected by attachment <a> (docs/design.md §3.1, issue 3):
//
//   - spec.networks[]: {"name": "fp-<a>", "multus": {"networkName": "<nad>"}}
//   - spec.domain.devices.interfaces[]: {"name": "fp-<a>", "binding": {"name": "fastpath"}, "model": "virtio"}
//     (datapath Macvtap: "fastpath-macvtap"): Fastpath's network binding plugin,
//     whose sidecar is the domain hook (see Network.Binding)
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
// the previous value (or absence) of every scalar it set and every container
// (map or list) it had to create. Unwire follows the record: it removes the
// added entries, restores each scalar, deletes each created container that is
// empty again and finally the record itself, so the VM's spec after Unwire is
// byte for byte the spec before Wire. A value the user already had (an equal
// affinity term, the label or node selector with our value) is not recorded
// as ours and is left in place by Unwire.
//
// # The hook sidecar annotation of earlier versions
//
// Fastpath before the binding plugin appended the domain hook to the template
// annotation hooks.kubevirt.io/hookSidecars (a JSON list inside a string,
// kubevirt/kubevirt pkg/hooks/hooks.go), splicing the text so every byte of
// the user's entries stayed as it was, and recorded the value before and
// after. Wire and Unwire now remove that entry: while the annotation still
// equals what was written, the value before comes back exactly (or the
// annotation goes); if the user changed it since, only the operator's entry
// (the last one with its image) is cut out. A value that is no longer a JSON
// list of hook sidecar objects is never rewritten: Wire reports a
// *ConflictError naming spec.template.metadata.annotations["hooks.kubevirt.io/hookSidecars"]
// and Unwire an error with the same words, both changing nothing and keeping
// the Record until the user repairs the value.
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
