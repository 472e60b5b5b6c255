// Package domaintuning defines the value of the fastpath.io/tuning annotation
// (v1alpha1.TuningAnnotation) that the operator writes on a wired VM's template
// (spec.template.metadata.annotations) and the KubeVirt domain hook
// (fastpath-domain-hook, onDefineDomain) reads back from the VMI to edit the
// libvirt domain: vhost driver queues, rx/tx virtio queue sizes, host and guest
// offloads and MTU.
//
// KubeVirt has no API for virtio queue sizes or a multiqueue cap (docs/design.md §4.1),
// so the annotation is the only channel between the operator and the hook. The
// JSON shape is part of the public contract (docs/design.md §3.1), keyed by the VM
// network name ("fp-<attachment>"; the domain interface alias is "ua-<name>"):
//
//	{"interfaces": {"fp-db-link": {"mtu": 9000, "queues": 4, "rxQueueSize": 1024,
//	  "txQueueSize": 256, "offloads": {"tso": "On", "gso": "On", "gro": "On", "txChecksum": "On"}}}}
//
// Marshal validates and renders that JSON deterministically (struct fields in
// declaration order, map keys sorted), so the operator can compare the
// annotation it wants with the one on the VM byte for byte. Parse is lenient
// about unknown keys (an older hook must accept a newer operator's annotation)
// and strict about the values it knows.
package domaintuning
